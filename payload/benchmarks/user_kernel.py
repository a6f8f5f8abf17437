"""A user's elementwise kernel (`"op": "kernel"`, a saxpy written in GLSL, a float and a vec4
version) against the built-in saxpy on the same device in the same run: GPU time of the one
node and its GB/s.

    PYTHONPATH=payload/src python3 payload/benchmarks/user_kernel.py [--log2n 26 28] [--runs 10]

Needs glslc (or glslangValidator). Prints one JSON line per size and kind, then a table:
the median and best GPU time over the runs after one warm-up, GB/s as the 12 bytes an
element moves (read x and y, write the result) over the best time, and the user kernels'
GB/s over the built-in's. The vec4 kernel declares its arrays as vec4s (and floats, for the
n % 4 tail): one invocation per four elements, as the built-in elementwise shader. Both index
a 2-D grid (docs/cli.md), so that they run at every size on devices with 65535 workgroups
along x too.
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
SAXPY_VEC4_GLSL = """#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer Y4 { vec4 y4[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(std430, binding = 2) writeonly buffer Out4 { vec4 o4[]; };
layout(push_constant) uniform Push { float a; } p;
void main() {
    uint row = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * row;
    if (i < o4.length()) {
        o4[i] = p.a * x4[i] + y4[i];
    } else if (i == o4.length()) {
        for (uint j = 4 * i; j < o.length(); ++j) o[j] = p.a * x[j] + y[j];
    }
}
"""
SHADERS = {"user": SAXPY_GLSL, "user-vec4": SAXPY_VEC4_GLSL}
BYTES_PER_ELEMENT = 12


def graphs(n: int) -> dict[str, dict[str, Any]]:
    """The built-in saxpy and the user kernel on the same inputs."""
    inputs = {
        "x": {"type": "vector", "random": {"n": n, "seed": 1}},
        "y": {"type": "vector", "random": {"n": n, "seed": 2}},
    }

    def user(kind: str) -> dict[str, Any]:
        return {
            "version": 1,
            "name": f"saxpy-{kind}-{n}",
            "inputs": inputs,
            "nodes": [
                {
                    "id": "s",
                    "op": "kernel",
                    "kernel": {"file": f"saxpy_{kind}.comp"},
                    "inputs": {"x": "x", "y": "y", "a": 2.5},
                    "output": {"like": "x"},
                }
            ],
            "outputs": ["s"],
        }

    return {
        "builtin": {
            "version": 1,
            "name": f"saxpy-builtin-{n}",
            "inputs": {**inputs, "a": {"type": "scalar", "value": 2.5}},
            "nodes": [{"id": "s", "op": "saxpy", "inputs": {"a": "a", "x": "x", "y": "y"}}],
            "outputs": ["s"],
        },
        **{kind: user(kind) for kind in SHADERS},
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
        for kind, source in SHADERS.items():
            Path(folder, f"saxpy_{kind}.comp").write_text(source, encoding="utf-8")
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
    kinds = list(graphs(1))
    print(f"{'n':>11}" + "".join(f" {kind + ' GB/s':>16}" for kind in kinds) + "  over built-in")
    for log2n in args.log2n:
        n = 1 << log2n
        gb_s = {r["kind"]: r["gb_s"] for r in rows if r["n"] == n}
        ratios = " ".join(f"{gb_s[k] / gb_s['builtin']:.3f}" for k in kinds[1:])
        print(
            f"{'2^' + str(log2n):>11}" + "".join(f" {gb_s[k]:>16}" for k in kinds) + f"  {ratios}"
        )


if __name__ == "__main__":
    main()
