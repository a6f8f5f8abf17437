"""`gpulab metrics`: Slurm's and the GPUs' metrics in Prometheus' text format, to stdout or
atomically into a file of node_exporter's textfile directory. Exit 0 when written (an unhealthy
GPU or an unreachable Slurm is a value in the metrics, not an error), 2 for bad flags or a
file name node_exporter would not read, 4 when the file cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpulab._shown import PATH_LIMIT, shown
from gpulab.cli.errors import EXIT_INPUT, EXIT_OK, EXIT_RUNTIME


def _count(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count (0, 1, ...), got {shown(text)}")
    return value


def add_parser(commands: Any) -> None:
    """Register `metrics` on the subcommand parsers."""
    parser = commands.add_parser(
        "metrics", help="Slurm and GPU metrics for Prometheus (node_exporter's textfile collector)"
    )
    parser.add_argument(
        "--textfile",
        type=Path,
        metavar="DIR/OUT.prom",
        help="replace this file atomically instead of printing (its folder must exist)",
    )
    parser.add_argument("--slurm", action="store_true", help="node states and jobs per partition")
    parser.add_argument("--gpu", action="store_true", help="health, bandwidth, memory per GPU")
    parser.add_argument(
        "--devices",
        type=_count,
        metavar="N",
        help="with --gpu: check devices 0..N-1, a missing one as failed (default: every device)",
    )
    parser.add_argument(
        "--bench-elements",
        type=_count,
        default=1 << 20,
        metavar="N",
        help="with --gpu: copy and saxpy bandwidth on N floats (default 2^20; 0: no measurement)",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Collect what the flags ask for and write it."""
    if not (args.slurm or args.gpu):
        print("gpulab metrics: give --slurm, --gpu or both", file=sys.stderr)
        return EXIT_INPUT
    if args.textfile is not None and args.textfile.suffix != ".prom":
        textfile = shown(str(args.textfile), quote=False, limit=PATH_LIMIT)
        print(f"gpulab metrics: --textfile {textfile}: must end in .prom", file=sys.stderr)
        return EXIT_INPUT
    from gpulab import metrics  # noqa: PLC0415  (the GPU part loads numpy and Vulkan)

    families = metrics.collect(
        slurm=args.slurm, gpu=args.gpu, devices=args.devices, bench_elements=args.bench_elements
    )
    try:
        text = metrics.write(families, args.textfile)
    except OSError as exc:
        textfile = shown(str(args.textfile), quote=False, limit=PATH_LIMIT)
        print(f"gpulab metrics: cannot write {textfile}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_RUNTIME
    if args.textfile is None:
        sys.stdout.write(text)
    return EXIT_OK
