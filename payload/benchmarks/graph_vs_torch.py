"""Ten dependent elementwise and reduction nodes on 2^N floats: gpulab's Vulkan backend (one
submission, GPU timestamps) against torch eager running the same ops in the same process.

    PYTHONPATH=payload/src python3 payload/benchmarks/graph_vs_torch.py [--log2n 24] [--runs 20]

Prints one JSON object: the GPU time of the Vulkan submission (first to last timestamp, i.e.
the sum of the per-node times), fused (the default) and with `--no-fuse` (`vulkan_no_fuse`),
each with its dispatch count and fused groups; torch's time between CUDA events around the same
ten ops; the median over runs after one warm-up, and how far they disagree on the scalars.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from gpulab import Runner, load_graph


def ten_nodes(n: int) -> dict[str, Any]:
    """saxpy, l2_norm, normalize, scale by the norm (a device scalar), add, max, saxpy by the
    max, dot, sum, min: each node reads an earlier one."""
    vector = {"type": "vector"}
    return {
        "version": 1,
        "name": "ten-dependent-nodes",
        "inputs": {
            "x": {**vector, "random": {"n": n, "seed": 1, "low": -1.0, "high": 1.0}},
            "y": {**vector, "random": {"n": n, "seed": 2}},
            "a": {"type": "scalar", "value": 0.75},
        },
        "nodes": [
            {"id": "s1", "op": "saxpy", "inputs": {"a": "a", "x": "x", "y": "y"}},
            {"id": "n1", "op": "l2_norm", "inputs": {"x": "s1"}},
            {"id": "u1", "op": "normalize", "inputs": {"x": "s1"}},
            {"id": "s2", "op": "scale", "inputs": {"x": "u1", "a": "n1"}},
            {"id": "s3", "op": "add", "inputs": {"x": "s2", "y": "x"}},
            {"id": "m", "op": "max", "inputs": {"x": "s3"}},
            {"id": "s4", "op": "saxpy", "inputs": {"a": "m", "x": "u1", "y": "s3"}},
            {"id": "d", "op": "dot", "inputs": {"x": "s4", "y": "y"}},
            {"id": "t", "op": "sum", "inputs": {"x": "s4"}},
            {"id": "mn", "op": "min", "inputs": {"x": "s4"}},
        ],
        "outputs": ["n1", "m", "d", "t", "mn"],
    }


def vulkan_times(
    document: dict[str, Any], runs: int, gap_s: float = 0.0, fuse: bool = True
) -> tuple[list[float], dict[str, float], Any]:
    graph = load_graph(document)
    gpu_ms: list[float] = []
    with Runner("vulkan", fuse=fuse) as runner:
        runner.run(graph)  # warm-up: pipelines and the recording
        for _ in range(runs):
            time.sleep(gap_s)  # an idle GPU before the run, as between separate jobs
            result = runner.run(graph)
            gpu_ms.append(sum(node.time_ms for node in result.nodes))
        executor = runner.executor("vulkan")
        recorded = getattr(executor, "recorded", None)
    outputs = {name: float(value) for name, value in result.outputs.items()}
    about = {
        "recordings": recorded,
        "device": result.device,
        "dispatches": result.dispatches,
        "fusion": result.fusion,
        "fused": result.fused,
    }
    return gpu_ms, outputs, about


def torch_times(document: dict[str, Any], runs: int) -> tuple[list[float], dict[str, float]]:
    import torch  # noqa: PLC0415 - only where torch is installed

    graph = load_graph(document)
    from gpulab.graph import materialize  # noqa: PLC0415

    x = torch.from_numpy(materialize(graph.inputs["x"])).cuda()
    y = torch.from_numpy(materialize(graph.inputs["y"])).cuda()
    a = 0.75

    def ops() -> dict[str, Any]:
        s1 = a * x + y
        n1 = torch.linalg.vector_norm(s1)
        u1 = s1 / n1
        s2 = u1 * n1
        s3 = s2 + x
        m = s3.max()
        s4 = m * u1 + s3
        return {"n1": n1, "m": m, "d": torch.dot(s4, y), "t": s4.sum(), "mn": s4.min()}

    ops()
    torch.cuda.synchronize()
    times: list[float] = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        values = ops()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return times, {name: float(value.item()) for name, value in values.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument(
        "--gap-ms", type=float, default=0.0, help="sleep before each Vulkan run (idle GPU)"
    )
    args = parser.parse_args()
    document = ten_nodes(1 << args.log2n)
    began = time.perf_counter()
    report: dict[str, Any] = {
        "n": 1 << args.log2n,
        "nodes": len(document["nodes"]),
        "runs": args.runs,
    }
    for key, fuse in (("vulkan", True), ("vulkan_no_fuse", False)):
        gpu_ms, outputs, about = vulkan_times(document, args.runs, args.gap_ms / 1e3, fuse)
        report[key] = {
            "gpu_ms_median": statistics.median(gpu_ms),
            "gpu_ms_min": min(gpu_ms),
            "gpu_ms_runs": [round(ms, 4) for ms in gpu_ms],
            "gap_ms": args.gap_ms,
            **about,
        }
        report[f"{key}_outputs"] = outputs
    vulkan_out = report["vulkan_outputs"]
    report["fused_speedup"] = (
        report["vulkan_no_fuse"]["gpu_ms_median"] / report["vulkan"]["gpu_ms_median"]
    )
    if not args.no_torch:
        torch_ms, torch_out = torch_times(document, args.runs)
        report["torch"] = {"ms_median": statistics.median(torch_ms), "ms_min": min(torch_ms)}
        report["torch_outputs"] = torch_out
        report["max_rel_diff"] = max(
            abs(vulkan_out[k] - torch_out[k]) / max(abs(torch_out[k]), 1e-30) for k in torch_out
        )
        for key in ("vulkan", "vulkan_no_fuse"):
            report[f"{key}_over_torch"] = report[key]["gpu_ms_median"] / statistics.median(torch_ms)
    report["wall_s"] = time.perf_counter() - began
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
