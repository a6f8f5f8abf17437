"""`gpulab run GRAPH.json`: validate, run on a backend, write the result JSON."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab._shown import PATH_LIMIT, shown
from gpulab.backends.names import BACKEND_NAMES
from gpulab.cli.arguments import add_backend, add_device, add_graph
from gpulab.cli.errors import EXIT_OK, EXIT_RUNTIME
from gpulab.cli.graph_errors import guarded
from gpulab.cli.graph_file import load_for_command
from gpulab.cli.head_start import WORKER_ENV, take, worker_socket
from gpulab.cli.output import say, warn
from gpulab.graph import Graph, GraphInvalid, MemoryLimit

if TYPE_CHECKING:
    from gpulab.running import Runner
    from gpulab.running.kept import KeptRunners

BUDGET_ENV = "GPULAB_MEMORY_BUDGET"
_kept: KeptRunners | None = None
"""Set while a `gpulab worker` serves runs: their Runners are kept open between graphs."""
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def memory_size(text: str) -> int:
    """Bytes from `1048576`, `64M`, `64MiB` or `2G` (binary units); at least 1."""
    match = re.fullmatch(r"\s*(\d{1,16})\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if match is None or int(match[1]) < 1:
        raise argparse.ArgumentTypeError(
            "expected a number of bytes of at least 1 (such as 1048576, 64M, 2GiB), "
            f"got {shown(text)}"
        )
    return int(match[1]) * _UNITS[match[2].lower()]


def _budget(args: argparse.Namespace) -> int | None:
    """--memory-budget, else $GPULAB_MEMORY_BUDGET, else None (ValueError when malformed)."""
    if args.memory_budget is not None:
        budget: int = args.memory_budget
        return budget
    text = os.environ.get(BUDGET_ENV, "")
    if not text:
        return None
    try:
        return memory_size(text)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{BUDGET_ENV}: {exc}") from None


def add_parser(commands: Any) -> None:
    """Register `run` on the subcommand parsers."""
    parser = commands.add_parser("run", help="validate and run a compute graph")
    add_graph(parser)
    add_backend(parser)
    add_device(parser)
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT.json",
        help="write the result here (replaced atomically; `-` is stdout)",
    )
    parser.add_argument(
        "--full", action="store_true", help="include the data of outputs over 65536 elements"
    )
    parser.add_argument(
        "--compare",
        choices=BACKEND_NAMES,
        help="run again on this backend and report the largest relative error per output",
    )
    parser.add_argument(
        "--memory-budget",
        type=memory_size,
        metavar="BYTES",
        help="cap every Vulkan memory heap at BYTES (64M, 2GiB, ...; default "
        f"${BUDGET_ENV}, else the heaps' sizes): a graph that does not fit fails with exit 4, "
        "or under --backend auto runs on cpu, reported under `fallback` in the result",
    )
    parser.add_argument(
        "--no-fuse",
        dest="fuse",
        action="store_false",
        help="run every node as its own dispatches on Vulkan (by default chains of elementwise "
        "ops and the reduction they feed run as one shader; see `fused` in the result)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print where the time went (load, inputs, upload, record, gpu, readback, write) "
        "as a table on stderr",
    )
    parser.add_argument(
        "--worker",
        metavar="SOCKET",
        default=worker_socket(),
        help="run on the `gpulab worker` serving SOCKET, whose device stays open between graphs "
        f"(default ${WORKER_ENV}; paths are taken from this directory, the environment is the "
        "worker's)",
    )
    parser.set_defaults(handler=main)


@contextlib.contextmanager
def runs_kept_open(kept: KeptRunners) -> Iterator[None]:
    """Within the block, `run` takes its Runner from `kept` and leaves it open (gpulab
    worker)."""
    global _kept  # noqa: PLW0603 - one worker per process, set around its serving loop
    previous, _kept = _kept, kept
    try:
        yield
    finally:
        _kept = previous


@contextlib.contextmanager
def _runner(args: argparse.Namespace, budget: int | None) -> Iterator[Runner]:
    """This run's Runner: a new one, closed after the graph, or a worker's kept one."""
    from gpulab.running import Runner  # noqa: PLC0415

    if _kept is not None:
        from gpulab.running.kept import RunnerOptions  # noqa: PLC0415

        with _kept.runner(RunnerOptions(args.backend, args.device, budget, args.fuse)) as kept:
            yield kept
        return
    runner = Runner(args.backend, args.device, budget, fuse=args.fuse)
    # Where the process ends with the command, its end releases the runner (cli.main.entry).
    with contextlib.nullcontext(runner) if args.process_ends else runner:
        yield runner


def profile_table(timing: dict[str, float], run_phases: tuple[str, ...]) -> str:
    """The `timing` of a result as a table: each phase, and the run's time no phase covers."""
    accounted = sum(timing[key] for key in run_phases)
    rows = [
        (key.removesuffix("_ms"), ms)
        for key, ms in timing.items()
        if key != "total_ms" and key.endswith("_ms")
    ]
    rows += [
        ("run total", timing["total_ms"]),
        ("run, in no phase", max(timing["total_ms"] - accounted, 0.0)),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{'phase':<{width}}  {'ms':>10}"]
    lines += [f"{name:<{width}}  {ms:>10.3f}" for name, ms in rows]
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from gpulab.running.early import finish_early, start_vulkan  # noqa: PLC0415

    # The driver starts on a second thread while this one imports and loads the graph, and
    # the device too unless a worker's kept runner has one open (the `gpulab` command started
    # it already from its bare command line where it could: head_start); joined before
    # returning, so no exit path leaves the driver half made.
    early = take()
    if early is None:
        early = start_vulkan(args.backend, args.device, open_ahead=_kept is None)
    try:
        return _run_graph(args)
    finally:
        finish_early(early, release=not args.process_ends)


def _load(path: str, limit: MemoryLimit, *, check_values: bool) -> Graph:
    """The graph to run. Loaded without the values' check, a graph validation refuses is
    loaded again with it, so that the run refuses it with exactly validate's lines."""
    try:
        return load_for_command(path, limit=limit, check_values=check_values)
    except GraphInvalid:
        if not check_values:
            load_for_command(path, limit=limit)
        raise


def _run_graph(args: argparse.Namespace) -> int:
    # Imported here: the runner loads numpy and the backends, which --help need not pay for.
    from gpulab.backends.base import RUN_PHASES  # noqa: PLC0415
    from gpulab.results import prepare_output, write_result  # noqa: PLC0415

    budget = _budget(args)
    with _runner(args, budget) as runner:
        started = time.perf_counter()
        # On Vulkan the values of .npy inputs are checked where the device reads them (one
        # dispatch per file) instead of by a pass over every file here.
        on_device = runner.backend == "vulkan"
        graph = _load(args.graph, runner.memory_limit(), check_values=not on_device)
        load_ms = (time.perf_counter() - started) * 1e3
        warn(args.graph, graph.warnings)
        target = prepare_output(
            args.output, Path(args.graph), graph, args.full, runner.memory_limit()
        )
        if args.backend == "auto":
            say(runner.reason)
        try:
            result = runner.run(graph, compare=args.compare)
        except Exception:
            if on_device:
                # What validate refuses, refused in its words, whatever stopped the run.
                _load(args.graph, runner.memory_limit(), check_values=True)
            raise
        result.phases["load_ms"] = load_ms
        for note in result.warnings[len(graph.warnings) :]:  # the run's own, after the graph's
            say(f"{shown(args.graph, quote=False, limit=PATH_LIMIT)}: warning: {note}")
        if runner.device_warning is not None:
            say(runner.device_warning)
        if runner.fallback is not None:
            say(f"ran on cpu instead of vulkan: {runner.fallback['reason']}")
    started = time.perf_counter()
    write_result(target, lambda stream: result.write_json(stream, full=args.full))
    if args.profile:
        # The whole write, the file's flush and rename included (the JSON's stops before).
        write_ms = (time.perf_counter() - started) * 1e3
        print(profile_table(result.timing(write_ms), RUN_PHASES), file=sys.stderr)
    comparison = result.comparison
    if comparison is not None and not comparison["ok"]:
        for name, error in comparison["max_rel_err"].items():
            if error > comparison["rtol"]:
                say(
                    f"--compare {args.compare}: output {shown(name)} differs by {error:.3g} "
                    f"(relative), more than {comparison['rtol']:g}"
                )
        return EXIT_RUNTIME
    return EXIT_OK


def main(args: argparse.Namespace) -> int:
    """Run the graph (here, or on the worker of --worker); errors become one line each and
    the contract's exit code."""
    if args.worker is not None and _kept is None:
        from gpulab.cli.worker_client import run_on_worker  # noqa: PLC0415

        return run_on_worker(args.worker, args.argv)
    return guarded(args.graph, lambda: _run(args))
