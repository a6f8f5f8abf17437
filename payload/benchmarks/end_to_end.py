"""End to end, as a user runs it: `gpulab run` of a 4-node graph as a whole process, on each
backend, against the same computation as a numpy script and a torch script (issue 16).

    PYTHONPATH=payload/src python3 payload/benchmarks/end_to_end.py \
        [--log2n 26 28] [--repeats 5] [--json OUT.json] [--python PYTHON] [--npy] [--worker]

The graph: s = saxpy(2, x, y) -> l2_norm(s) -> normalize(s) -> sum, on two random inputs of
2^N float32 values (x uniform in [-1, 1) seed 1, y uniform in [0, 1) seed 2); the outputs are
the two scalars, so the result JSON is small. Every command is a new process (interpreter
start, imports, input generation, the run, the result), timed from spawn to exit; after one
warm-up each, the commands take turns repeat by repeat, so a drifting machine slows all alike.
The numpy script makes the inputs as the graph format defines them; the torch script (only
where torch imports; on CUDA when available) draws its inputs on its device with torch's own
generator. The vulkan backend runs twice: fused (the default) and with `--no-fuse`. Prints a
table of median wall seconds with the ratios issue 16 sets targets for and each vulkan run's
dispatches, and writes every run (and gpulab's `timing` phases) as JSON. `--python` names the
interpreter of the gpulab runs and the numpy script (a worker's: gpulab's own venv, whose
start-up a machine's torch venv, with its .pth hooks, would slow); the torch script runs in
this one.

`--npy` gives the graph its inputs as users' .npy files instead (x.npy and y.npy, the same
values, written once; read from the page cache after the warm-up), the numpy script reads
them with np.load, and there is no torch script. It then also times, in this process, a plain
copy of one input's size into a device buffer from pinned (HOST_CACHED) memory on device 0
(the copy engine's rate, GPU timestamps, as `gpulab.diagnostics.memory_bench` measures it)
and prints for each size: vulkan's whole-process speed-up over cpu, the vulkan run's median
load, inputs and upload ms, the rate, and upload_ms over bytes / rate (1.0: the inputs moved
at the copy engine's rate, their reads from the file hidden behind the copies).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BACKENDS = ("cpu", "native", "vulkan")
NO_FUSE = "gpulab vulkan --no-fuse"
WORKER = "--worker"
SCALE = 2.0

NUMPY_SCRIPT = f"""
import json, sys
import numpy as np
n = int(sys.argv[1])
x = np.random.default_rng(1).uniform(-1.0, 1.0, n).astype(np.float32)
y = np.random.default_rng(2).uniform(0.0, 1.0, n).astype(np.float32)
s = np.float32({SCALE}) * x + y
norm = np.sqrt(np.dot(s, s))
t = (s / norm).sum(dtype=np.float32)
print(json.dumps({{"norm": float(norm), "total": float(t)}}))
"""

TORCH_SCRIPT = f"""
import json, sys
import torch
n = int(sys.argv[1])
device = "cuda" if torch.cuda.is_available() else "cpu"
generator = torch.Generator(device=device)
x = torch.rand(n, generator=generator.manual_seed(1), device=device) * 2.0 - 1.0
y = torch.rand(n, generator=generator.manual_seed(2), device=device)
s = {SCALE} * x + y
norm = torch.linalg.vector_norm(s)
t = (s / norm).sum()
print(json.dumps({{"norm": norm.item(), "total": t.item(), "device": device}}))
"""


NUMPY_NPY_SCRIPT = f"""
import json, sys
import numpy as np
x = np.load(sys.argv[1])
y = np.load(sys.argv[2])
s = np.float32({SCALE}) * x + y
norm = np.sqrt(np.dot(s, s))
t = (s / norm).sum(dtype=np.float32)
print(json.dumps({{"norm": float(norm), "total": float(t)}}))
"""

RANDOM_INPUTS: dict[str, dict[str, Any]] = {
    "x": {"seed": 1, "low": -1.0, "high": 1.0},
    "y": {"seed": 2},
}


def four_nodes(n: int, files: dict[str, str] | None = None) -> dict[str, Any]:
    """saxpy -> l2_norm -> normalize -> sum on two random inputs (or `files`, by input name);
    the scalars are the outputs."""
    vector = {"type": "vector"}
    inputs: dict[str, Any] = {
        name: {**vector, "file": files[name]} if files else {**vector, "random": {"n": n, **r}}
        for name, r in RANDOM_INPUTS.items()
    }
    return {
        "version": 1,
        "name": "saxpy-norm-normalize-sum",
        "inputs": {**inputs, "a": {"type": "scalar", "value": SCALE}},
        "nodes": [
            {"id": "s", "op": "saxpy", "inputs": {"a": "a", "x": "x", "y": "y"}},
            {"id": "norm", "op": "l2_norm", "inputs": {"x": "s"}},
            {"id": "u", "op": "normalize", "inputs": {"x": "s"}},
            {"id": "total", "op": "sum", "inputs": {"x": "u"}},
        ],
        "outputs": ["norm", "total"],
    }


def write_npy_inputs(n: int, workdir: Path) -> dict[str, str]:
    """x.npy and y.npy of 2^N float32: the graph's random inputs, as gpulab makes them."""
    import numpy as np  # noqa: PLC0415 - only --npy needs numpy here
    from gpulab.graph import GraphInput  # noqa: PLC0415
    from gpulab.graph.model import Random  # noqa: PLC0415
    from gpulab.graph.values import materialize  # noqa: PLC0415
    from gpulab.ops import Kind  # noqa: PLC0415

    files = {}
    for name, r in RANDOM_INPUTS.items():
        source = Random(int(r["seed"]), float(r.get("low", 0.0)), float(r.get("high", 1.0)))
        path = workdir / f"{name}-{n}.npy"
        np.save(path, materialize(GraphInput(name, Kind.VECTOR, (n,), source)))
        files[name] = path.name
    return files


def result_name(label: str, n: int) -> str:
    """The result file of a gpulab contender: result-N-vulkan-no-fuse.json and the like."""
    return f"result-{n}-{'-'.join(word.lstrip('-') for word in label.split()[1:])}.json"


def commands(
    n: int,
    workdir: Path,
    python: str,
    with_torch: bool,
    *,
    npy: bool = False,
    worker: Path | None = None,
) -> dict[str, list[str]]:
    """Each contender's argv for 2^N values: gpulab run per backend, the numpy/torch scripts
    (with `npy`, on .npy inputs: no torch script, the numpy script reads the files); with
    `worker`, also cpu and vulkan runs handed to the gpulab worker serving that socket."""
    graph = workdir / f"graph-{n}.json"
    files = write_npy_inputs(n, workdir) if npy else None
    graph.write_text(json.dumps(four_nodes(n, files)))
    options: dict[str, tuple[str, ...]] = {
        f"gpulab {backend}": ("--backend", backend) for backend in BACKENDS
    }
    options[NO_FUSE] = ("--backend", "vulkan", "--no-fuse")
    if worker is not None:
        for backend in ("cpu", "vulkan"):
            options[f"gpulab {backend} {WORKER}"] = ("--backend", backend, WORKER, str(worker))
    argv = {
        label: [
            *(python, "-m", "gpulab", "run", str(graph), *flags),
            *("-o", str(workdir / result_name(label, n))),
        ]
        for label, flags in options.items()
    }
    if files is not None:
        paths = [str(workdir / files[name]) for name in RANDOM_INPUTS]
        argv["numpy script"] = [python, "-c", NUMPY_NPY_SCRIPT, *paths]
        return argv
    argv["numpy script"] = [python, "-c", NUMPY_SCRIPT, str(n)]
    if with_torch:
        argv["torch script"] = [sys.executable, "-c", TORCH_SCRIPT, str(n)]
    return argv


def run_once(argv: list[str]) -> tuple[float, str]:
    """Wall seconds from spawn to exit, and stdout; a failed command stops the benchmark."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[:6]} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return wall, done.stdout


def scalars(label: str, stdout: str, workdir: Path, n: int) -> dict[str, Any]:
    """The two scalars a contender computed (gpulab's from its result file), with its timing."""
    if not label.startswith("gpulab "):
        return dict(json.loads(stdout))
    result = json.loads((workdir / result_name(label, n)).read_text())
    values = {name: result["outputs"][name]["value"] for name in ("norm", "total")}
    timing = dict(result["timing"])
    if "memory" in result:  # the Vulkan run: its staging ring, allocated (pinned) in upload_ms
        transfers = result["memory"]["transfers"]
        timing["staging_alloc_ms"] = transfers["staging_alloc_ms"]
        timing["staging_mib"] = transfers["staging_bytes"] / (1 << 20)
    about = {"timing": timing, "device": result["device"].get("name")}
    if "fusion" in result:
        about |= {"fusion": result["fusion"], "fused": result["fused"]}
    return values | about


@contextlib.contextmanager
def worker_serving(python: str, workdir: Path) -> Iterator[Path]:
    """A `gpulab worker` of `python` on a socket in `workdir`, stopped after the block."""
    path = workdir / "worker.sock"
    worker = subprocess.Popen([python, "-m", "gpulab", "worker", "--socket", str(path)])
    try:
        while not path.is_socket():
            if worker.poll() is not None:
                raise SystemExit(f"the gpulab worker exited {worker.returncode}")
            time.sleep(0.05)
        yield path
    finally:
        worker.terminate()
        worker.wait()


def measure(
    n: int,
    repeats: int,
    workdir: Path,
    python: str,
    with_torch: bool,
    *,
    npy: bool = False,
    worker: Path | None = None,
) -> dict[str, Any]:
    argv = commands(n, workdir, python, with_torch, npy=npy, worker=worker)
    for command in argv.values():
        run_once(command)  # warm-up: page cache, shader and pipeline caches
    walls: dict[str, list[float]] = {label: [] for label in argv}
    last: dict[str, dict[str, Any]] = {}
    phases: dict[str, list[dict[str, float]]] = {label: [] for label in argv}
    for _ in range(repeats):
        for label, command in argv.items():
            wall, stdout = run_once(command)
            walls[label].append(wall)
            last[label] = scalars(label, stdout, workdir, n)
            if "timing" in last[label]:
                phases[label].append(last[label].pop("timing"))
    median = {label: statistics.median(w) for label, w in walls.items()}
    return {
        "n": n,
        "runs_s": walls,
        "median_s": median,
        "vulkan_speedup": speedups(median),
        "worker_speedup": worker_speedups(median),
        "min_s": {label: min(w) for label, w in walls.items()},
        "timing_median_ms": {
            label: {key: statistics.median(t[key] for t in runs) for key in runs[0]}
            for label, runs in phases.items()
            if runs
        },
        "outputs": last,
    }


def speedups(median: dict[str, float]) -> dict[str, float]:
    """How many times faster the vulkan run is than each other contender (issue 16's targets:
    cpu 3x at 2^26 and 5x at 2^28, numpy script 1.5x and 3x, torch script more than 1x); the
    worker's runs are compared among themselves (worker_speedups)."""
    vulkan = median["gpulab vulkan"]
    return {
        label: s / vulkan
        for label, s in median.items()
        if label != "gpulab vulkan" and not label.endswith(WORKER)
    }


def worker_speedups(median: dict[str, float]) -> dict[str, float]:
    """vulkan on the worker against cpu on the worker and against a cpu run of its own."""
    served = median.get(f"gpulab vulkan {WORKER}")
    if served is None:
        return {}
    return {
        f"gpulab cpu {WORKER}": median[f"gpulab cpu {WORKER}"] / served,
        "gpulab cpu": median["gpulab cpu"] / served,
    }


def copy_engine(nbytes: int, repeat: int = 3) -> dict[str, float]:
    """GB/s of vkCmdCopyBuffer into a device buffer of `nbytes` on device 0, from upload
    memory ("h2d") and from pinned HOST_CACHED memory ("h2d_cached", the memory of the ring
    .npy inputs stream through), GPU-timed (gpulab.diagnostics.memory_bench)."""
    from gpulab.diagnostics.memory_bench import copy_engine_gbps  # noqa: PLC0415
    from gpulab.kernels.session import DeviceSession  # noqa: PLC0415

    with DeviceSession(0) as session:
        target = session.manager.allocate(nbytes, "device", label="copy engine target")
        try:
            return copy_engine_gbps(session, target, nbytes, repeat)
        finally:
            target.free()


def npy_lines(rows: list[dict[str, Any]]) -> str:
    """Per size: vulkan's whole-process speed-up over cpu, the vulkan run's load, inputs and
    upload ms, the copy engine's rate and upload_ms over bytes / rate."""
    lines = []
    for row in rows:
        timing = row["timing_median_ms"]["gpulab vulkan"]
        engine = row["copy_engine_gbps"]["h2d_cached"]
        floor_ms = row["input_bytes"] / (engine * 1e9) * 1e3
        row["upload_over_engine"] = timing["upload_ms"] / floor_ms
        lines.append(
            f"{log2(row['n'])} .npy inputs ({row['input_bytes'] / (1 << 20):g} MiB): "
            f"cpu / vulkan {row['vulkan_speedup']['gpulab cpu']:.2f}; vulkan load "
            f"{timing['load_ms']:.1f} ms, inputs {timing['inputs_ms']:.1f} ms, upload "
            f"{timing['upload_ms']:.1f} ms (of which allocating its {timing['staging_mib']:g} "
            f"MiB staging ring {timing['staging_alloc_ms']:.1f} ms); copy engine from pinned "
            f"memory {engine:.1f} GB/s "
            f"(from upload memory {row['copy_engine_gbps']['h2d']:.1f}): bytes / rate "
            f"{floor_ms:.1f} ms, upload_ms / (bytes / rate) {row['upload_over_engine']:.2f}"
        )
    return "\n".join(lines)


def log2(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: median wall seconds of each contender, then vulkan's speed-up over each, then
    the dispatches of the vulkan runs (fused, and --no-fuse)."""
    labels, others = list(rows[0]["median_s"]), list(rows[0]["vulkan_speedup"])
    counted = [label for label in labels if label.startswith("gpulab vulkan")]
    header = [
        *(f"{label} s" for label in labels),
        *(f"{label} / vulkan" for label in others),
        *(f"{label} dispatches" for label in counted),
    ]
    lines = ["| n | " + " | ".join(header) + " |", "|---|" + "---:|" * len(header)]
    for row in rows:
        timing = row["timing_median_ms"]
        cells = [
            *(f"{row['median_s'][label]:.3f}" for label in labels),
            *(f"{row['vulkan_speedup'][label]:.2f}" for label in others),
            *(f"{timing.get(label, {}).get('dispatches', float('nan')):.0f}" for label in counted),
        ]
        lines.append(f"| {log2(row['n'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, nargs="+", default=[26, 28], metavar="N")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-torch", action="store_true", help="leave the torch script out")
    parser.add_argument(
        "--npy",
        action="store_true",
        help="inputs from .npy files (no torch script); also times the copy engine",
    )
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="write every run here")
    parser.add_argument(
        "--worker",
        action="store_true",
        help="also run cpu and vulkan through one `gpulab worker` (started first, warm after "
        "the warm-up runs)",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter of the gpulab runs and the numpy script (default: this one)",
    )
    args = parser.parse_args()
    with_torch = (
        not args.no_torch and not args.npy and importlib.util.find_spec("torch") is not None
    )
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpulab-e2e-")))
        worker = stack.enter_context(worker_serving(args.python, folder)) if args.worker else None
        rows = [
            measure(
                1 << k,
                args.repeats,
                folder,
                args.python,
                with_torch,
                npy=args.npy,
                worker=worker,
            )
            for k in args.log2n
        ]
    print(table(rows))
    fusion = {str(row["outputs"].get("gpulab vulkan", {}).get("fusion", "on")) for row in rows}
    for state in sorted(fusion - {"on"}):
        # A GPU host without glslc runs the unfused program; a provisioned worker has it.
        print(f"gpulab vulkan ran with fusion {state}: these are --no-fuse figures")
    for row in rows:
        for label, ratio in row["worker_speedup"].items():
            print(f"{log2(row['n'])}: {label} / gpulab vulkan {WORKER}: {ratio:.2f}")
    if args.npy:
        for row in rows:
            row["input_bytes"] = 4 * row["n"] * len(RANDOM_INPUTS)
            row["copy_engine_gbps"] = copy_engine(4 * row["n"])
        print(npy_lines(rows))
    if args.json is not None:
        report = {
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "contender_python": args.python,
            "repeats": args.repeats,
            "torch": with_torch,
            "npy": args.npy,
            "rows": rows,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
