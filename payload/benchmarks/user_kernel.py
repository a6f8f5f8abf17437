"""A user's elementwise kernel (`"op": "kernel"`, a saxpy written in GLSL) against the built-in
saxpy on the same device in the same run: GPU time of the one node and its GB/s.

    PYTHONPATH=payload/src python3 payload/benchmarks/user_kernel.py [--log2n 26 28] [--runs 10]

Needs glslc (or glslangValidator). Prints one JSON line per size and kind, then a table:
the median and best GPU time over the runs after one warm-up, GB/s as the 12 bytes an
element moves (read x and y, write the result) over the best time, and the user kernel's
GB/s over the built-in's. The shader indexes a 2-D grid (docs/cli.md), so that it runs at
every size on devices with 65535 workgroups along x too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from gpulab import Runner, load_graph

SAXPY_GLSL = """#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { float a; } p;
void main() {
    uint row = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * row;
    if (i < o.length()) o[i] = p.a * x[i] + y[i];
}
"""
BYTES_PER_ELEMENT = 12


def graphs(n: int) -> dict[str, dict[str, Any]]:
    """The built-in saxpy and the user kernel on the same inputs."""
    inputs = {
        "x": {"type": "vector", "random": {"n": n, "seed": 1}},
        "y": {"type": "vector", "random": {"n": n, "seed": 2}},
    }
    return {
        "builtin": {
            "version": 1,
            "name": f"saxpy-builtin-{n}",
            "inputs": {**inputs, "a": {"type": "scalar", "value": 2.5}},
            "nodes": [{"id": "s", "op": "saxpy", "inputs": {"a": "a", "x": "x", "y": "y"}}],
            "outputs": ["s"],
        },
        "user": {
            "version": 1,
            "name": f"saxpy-user-{n}",
            "inputs": inputs,
            "nodes": [
                {
                    "id": "s",
                    "op": "kernel",
                    "kernel": {"file": "saxpy_user.comp"},
                    "inputs": {"x": "x", "y": "y", "a": 2.5},
                    "output": {"like": "x"},
                }
            ],
            "outputs": ["s"],
        },
    }


def gpu_times(runner: Runner, document: dict[str, Any], runs: int) -> list[float]:
    graph = load_graph(document)
    runner.run(graph)  # warm-up: the pipeline and the recording
    return [sum(node.time_ms for node in runner.run(graph).nodes) for _ in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, nargs="+", default=[26, 28])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "saxpy_user.comp").write_text(SAXPY_GLSL, encoding="utf-8")
        home = Path.cwd()
        os.chdir(folder)  # the kernel's file resolves against the working directory
        try:
            with Runner("vulkan") as runner:
                for log2n in args.log2n:
                    n = 1 << log2n
                    for kind, document in graphs(n).items():
                        times = gpu_times(runner, document, args.runs)
                        row = {
                            "n": n,
                            "kind": kind,
                            "gpu_ms_median": round(statistics.median(times), 4),
                            "gpu_ms_min": round(min(times), 4),
                            "gb_s": round(BYTES_PER_ELEMENT * n / min(times) / 1e6, 1),
                        }
                        rows.append(row)
                        print(json.dumps(row), flush=True)
        finally:
            os.chdir(home)
    print(f"{'n':>11} {'built-in GB/s':>14} {'user GB/s':>10} {'user/built-in':>14}")
    for log2n in args.log2n:
        n = 1 << log2n
        builtin, user = (next(r for r in rows if r["n"] == n and r["kind"] == k) for k in graphs(1))
        ratio = user["gb_s"] / builtin["gb_s"]
        print(f"{'2^' + str(log2n):>11} {builtin['gb_s']:>14} {user['gb_s']:>10} {ratio:>14.3f}")


if __name__ == "__main__":
    main()
