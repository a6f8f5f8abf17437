"""Inputs made on the device against made on the host and uploaded, at 2^N elements.

    PYTHONPATH=payload/src python3 payload/benchmarks/device_inputs.py [--log2n 24] [--runs 5]

For each generated source (random, linspace, fill) it times, on Vulkan device 0:
  host:   gpulab.graph.values.materialize (numpy) + Stager.upload into a device buffer;
  device: one submission of Kernels.generate into the same buffer (wall time around submit
          and wait, and the GPU time between timestamps).
Then a whole `Runner.run` of sum(x) on a random x both ways (the host way by opening the
device without shaderInt64/shaderFloat64, as on a device that lacks them). Medians over
--runs after one warm-up; both ways must give the same bits. Prints a table, then one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import gpulab.vk.device
import numpy as np
from gpulab import Runner, load_graph
from gpulab.graph.model import Fill, GraphInput, Linspace, Random, Source
from gpulab.graph.values import materialize
from gpulab.kernels import DeviceArray, Kernels, Pattern
from gpulab.memory import MemoryManager, Stager
from gpulab.ops import Kind
from gpulab.running.inputs import pattern_of
from gpulab.vk import CommandPool, Device, Fence, TimestampQueryPool, shared_instance

SOURCES: dict[str, Source] = {
    "random": Random(7, -1.0, 1.0),
    "linspace": Linspace(-2.0, 3.0),
    "fill": Fill(0.25),
}


def median_ms(runs: int, step: Callable[[], object]) -> float:
    """The median wall time of `runs` calls of `step`, after one warm-up."""
    step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class KernelBench:
    """One device, a device buffer of n floats, and both ways to fill it."""

    def __init__(self, n: int, runs: int) -> None:
        self.n, self.runs = n, runs
        self.device = Device(shared_instance().physical_devices()[0])
        self.manager = MemoryManager(self.device)
        self.stager = Stager(self.manager)
        self.kernels = Kernels(self.device)
        self.pool = CommandPool(self.device)
        self.fence = Fence(self.device)
        self.queries = TimestampQueryPool(self.device, 2)
        self.target = self.manager.allocate(4 * n, "device", label="benchmark input")

    def row(self, name: str, source: Source) -> dict[str, Any]:
        spec = GraphInput("x", Kind.VECTOR, (self.n,), source)
        host_values = materialize(spec)
        host_ms = median_ms(self.runs, lambda: materialize(spec))
        upload_ms = median_ms(self.runs, lambda: self.stager.upload(host_values, self.target))
        row: dict[str, Any] = {
            "source": name,
            "n": self.n,
            "host_generate_ms": host_ms,
            "upload_ms": upload_ms,
            "host_total_ms": host_ms + upload_ms,
        }
        pattern = pattern_of(spec)
        assert pattern is not None
        problem = self.kernels.cannot_generate(pattern, self.n)
        if problem is not None:
            row["device"] = f"not generated: {problem}"
            return row
        row["device_wall_ms"], row["device_gpu_ms"] = self.generate(pattern)
        row["speedup"] = row["host_total_ms"] / row["device_wall_ms"]
        made = self.stager.download(self.target, (self.n,))
        row["bitwise_equal"] = bool(
            np.array_equal(made.view(np.uint32), host_values.view(np.uint32))
        )
        return row

    def generate(self, pattern: Pattern) -> tuple[float, float]:
        """Median wall and GPU ms of one submission that generates `pattern`."""
        cmd = self.pool.allocate()
        cmd.begin()
        cmd.reset_queries(self.queries)
        cmd.write_timestamp(self.queries, 0)
        self.kernels.generate(cmd, pattern, DeviceArray.of(self.target, (self.n,)))
        cmd.write_timestamp(self.queries, 1)
        cmd.barrier("compute", "transfer")
        cmd.end()
        gpu: list[float] = []

        def submit() -> None:
            self.device.submit(cmd, self.fence)
            self.fence.wait()
            self.fence.reset()
            gpu.append(self.queries.elapsed_ns(0, 1) / 1e6)

        try:
            wall = median_ms(self.runs, submit)
        finally:
            cmd.close()
        return wall, statistics.median(gpu[1:])

    def summary(self) -> dict[str, Any]:
        info = self.device.info
        return {"name": info.name, "type": info.type, "driver": info.driver}

    def close(self) -> None:
        self.target.free()
        self.queries.close()
        self.fence.close()
        self.pool.close()
        self.kernels.close()
        self.stager.close()
        self.manager.close()
        self.device.close()


def runner_row(n: int, runs: int) -> dict[str, Any]:
    """sum(x) on a random x through the Runner: inputs made on the device, then on the host."""
    graph = load_graph(
        {
            "version": 1,
            "name": "sum-of-random",
            "inputs": {"x": {"type": "vector", "random": {"n": n, "seed": 3}}},
            "nodes": [{"id": "s", "op": "sum", "inputs": {"x": "x"}}],
            "outputs": ["s"],
        }
    )
    totals: dict[str, float] = {}
    sums: dict[str, float] = {}
    features = gpulab.vk.device.OPTIONAL_FEATURES
    for made_on in ("device", "host"):
        gpulab.vk.device.OPTIONAL_FEATURES = features if made_on == "device" else ()
        try:
            with Runner("vulkan") as runner:
                outcome = runner.run(graph)
                assert outcome.inputs["x"]["made_on"] == made_on, outcome.inputs
                sums[made_on] = float(outcome.outputs["s"])
                totals[made_on] = statistics.median(runner.run(graph).total_ms for _ in range(runs))
        finally:
            gpulab.vk.device.OPTIONAL_FEATURES = features
    return {
        "graph": "sum(x), x random",
        "n": n,
        "device_inputs_total_ms": totals["device"],
        "host_inputs_total_ms": totals["host"],
        "speedup": totals["host"] / totals["device"],
        "same_sum": sums["device"] == sums["host"],
    }


def print_table(device: dict[str, Any], rows: list[dict[str, Any]], log2n: int) -> None:
    print(f"{device['name']} ({device['driver']}), n = 2^{log2n}, medians, ms")
    header = ("source", "host gen", "upload", "host sum", "dev wall", "dev gpu", "speedup")
    print(f"{header[0]:<9}" + "".join(f"{h:>10}" for h in header[1:]) + "  bits")
    for row in rows:
        host = f"{row['source']:<9}" + "".join(
            f"{row[key]:10.2f}" for key in ("host_generate_ms", "upload_ms", "host_total_ms")
        )
        if "device_wall_ms" not in row:
            print(f"{host}  {row['device']}")
            continue
        equal = "equal" if row["bitwise_equal"] else "DIFFER"
        print(
            f"{host}{row['device_wall_ms']:10.2f}{row['device_gpu_ms']:10.2f}"
            f"{row['speedup']:9.1f}x  {equal}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    n = 1 << args.log2n
    bench = KernelBench(n, args.runs)
    try:
        rows = [bench.row(name, source) for name, source in SOURCES.items()]
        device = bench.summary()
    finally:
        bench.close()
    whole = runner_row(n, args.runs)
    print_table(device, rows, args.log2n)
    print(
        f"Runner.run sum(x): inputs made on the device {whole['device_inputs_total_ms']:.2f}, "
        f"on the host {whole['host_inputs_total_ms']:.2f} ({whole['speedup']:.1f}x), "
        f"same sum: {whole['same_sum']}"
    )
    print(json.dumps({"device": device, "rows": rows, "runner": whole}))


if __name__ == "__main__":
    main()
