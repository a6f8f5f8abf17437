"""Whole `gpulab run` processes of two (or more) source trees, in turn: the A/B of a start-up
or allocation change, where each run is a new process and the host's drift hits every tree
alike.

    python3 payload/benchmarks/trees_ab.py --python /tmp/wv/bin/python \
        old=/tmp/old-src new=payload/src --pairs 8 -- GRAPH.json --backend vulkan

Each round runs `PYTHON -m gpulab run GRAPH ... -o TMP` once per tree (PYTHONPATH=the tree),
the first round a warm-up; prints per tree the median, min and max wall time, the median of
each `timing` phase of the result, and whether its runs fused (`fusion`: off without a GLSL
compiler on PATH, which a GPU host may lack and a provisioned worker has). Compile each
tree's bytecode first (`python -m compileall TREE`): where PYTHONDONTWRITEBYTECODE is set, a
tree without it compiles at every start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run_once(python: str, tree: str, run_args: list[str], output: Path) -> tuple[float, Any]:
    """Wall seconds of one `gpulab run` process on `tree`, and its result."""
    env = dict(os.environ, PYTHONPATH=tree)
    started = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "gpulab", "run", *run_args, "-o", str(output)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    return wall, json.loads(output.read_text())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], usage="%(prog)s [options] LABEL=SRC ... -- RUN_ARGS"
    )
    parser.add_argument("trees", nargs="+", metavar="LABEL=SRC", help="a label and its tree")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to run")
    parser.add_argument("--pairs", type=int, default=8, help="measured rounds (after 1 warm-up)")
    if "--" not in argv:
        parser.error("give the run's arguments after --: -- GRAPH.json [--backend ...]")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    trees = dict(tree.split("=", 1) for tree in args.trees)
    run_args = argv[split + 1 :]
    walls: dict[str, list[float]] = {label: [] for label in trees}
    timings: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    fusion: dict[str, set[str]] = {label: set() for label in trees}
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "result.json"
        for round_index in range(args.pairs + 1):
            for label, tree in trees.items():
                wall, result = run_once(args.python, tree, run_args, output)
                if round_index > 0:
                    walls[label].append(wall)
                    timings[label].append(result["timing"])
                    fusion[label].add(str(result.get("fusion", "n/a")))
    for label, times in walls.items():
        phases = {
            key.removesuffix("_ms"): round(statistics.median(t[key] for t in timings[label]), 1)
            for key in timings[label][0]
            if key.endswith("_ms")
        }
        print(
            f"{label}: wall median {statistics.median(times) * 1e3:.0f} ms "
            f"(min {min(times) * 1e3:.0f}, max {max(times) * 1e3:.0f}) {phases} "
            f"fusion: {' / '.join(sorted(fusion[label]))}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
