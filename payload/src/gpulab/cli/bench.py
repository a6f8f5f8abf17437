"""`gpulab bench`: its arguments, registered without importing the benchmark itself (Vulkan and
the kernels load only when the command runs; see gpulab.diagnostics.bench)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpulab._shown import shown
from gpulab.cli.arguments import add_device
from gpulab.cli.errors import EXIT_OK
from gpulab.cli.output import say
from gpulab.diagnostics.bench_ops import (
    ALL_OPS,
    DEFAULT_OPS,
    OP_CHOICES,
    BenchOptions,
    parse_shape,
)


def add_parser(commands: Any) -> None:
    """Register `bench` on the subcommand parsers."""
    parser = commands.add_parser("bench", help="bandwidth of every op on a Vulkan device")
    parser.add_argument(
        "--ops",
        nargs="+",
        choices=OP_CHOICES,
        default=list(DEFAULT_OPS),
        metavar="OP",
        help=f"the ops to measure, of {', '.join(ALL_OPS)} (default: {' '.join(DEFAULT_OPS)})",
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=_size,
        metavar="N",
        help="elements (vector ops) or matrix sides (matvec, matmul, jacobi); "
        "default: powers of 4 from 2^10 up to what fits",
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        type=_shape,
        metavar="MxKxN",
        default=[],
        help="matmul also at these m x k by k x n products (with --ops matmul)",
    )
    parser.add_argument(
        "--backend", choices=["vulkan"], default="vulkan", help="only vulkan is measured"
    )
    add_device(parser, "the GPU Slurm allocated to the job, else 0")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the rows as JSON")
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="OUT.png",
        help="chart the run: Vulkan's speed relative to the --compare library per op and size, "
        "else GB/s against size per op (needs the plot extra: matplotlib)",
    )
    parser.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="RESULT.json",
        help="with --plot: measure nothing, redraw the chart from rows saved by bench --json "
        "(or by the memory benchmark's --json); no GPU needed",
    )
    parser.add_argument("--compare", choices=["torch", "cupy"], help="run the ops there too")
    parser.add_argument(
        "--no-overhead", action="store_true", help="skip the dispatch overhead rows"
    )
    parser.set_defaults(handler=main)


def _shape(text: str) -> tuple[int, int, int]:
    try:
        return parse_shape(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _size(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive size, got {shown(text)}")
    return value


def main(args: argparse.Namespace) -> int:
    """Run the benchmark, print the table, write JSON/PNG when asked; with --from, only
    draw the chart of saved rows."""
    if args.source is not None:
        return _redraw(args.source, args.plot)
    from gpulab.diagnostics.bench import bench  # noqa: PLC0415 - Vulkan and the kernels

    options = BenchOptions(
        args.ops,
        args.sizes,
        args.device,
        args.compare,
        overhead=not args.no_overhead,
        shapes=tuple(args.shapes),
    )
    print(bench(options, say, json_path=args.json, plot_path=args.plot))
    return EXIT_OK


def _redraw(source: Path, chart: Path | None) -> int:
    """`bench --from RESULT.json --plot OUT.png`: the chart of saved rows, no device."""
    from gpulab.diagnostics import bench_plot  # noqa: PLC0415 - matplotlib when drawing

    if chart is None:
        raise ValueError("--from needs --plot OUT.png (the chart to draw from the saved rows)")
    bench_plot.require_matplotlib()
    drawn = bench_plot.plot(bench_plot.load_rows(source), chart)
    say(f"{chart}: {drawn} chart of {source}")
    return EXIT_OK
