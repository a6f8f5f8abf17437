"""`gpulab bench`: effective bandwidth of every op on a Vulkan device, against its copy peak.

Each (op, size) is recorded `repeat` times into one command buffer between two timestamps;
the GPU time per op is the best of three submissions, wall time is submit-to-fence over the
same repeats. GB/s = bytes the op must read and write / GPU time; `pct_of_copy_peak` relates
that to the best copy kernel bandwidth measured in the same run. `--compare torch|cupy` runs
the same ops through that library on the same GPU in this process (CUDA events) and prints
the ratio. The dispatch overhead rows give GPU time per dispatch when many are batched, the
Python recording cost per dispatch (repeated, rebinding, and on arrays not seen before), and
one submit + fence wait.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpulab.backends import BackendUnavailable
from gpulab.diagnostics.bench_compare import Library, load_library
from gpulab.diagnostics.bench_ops import (
    VECTOR_OPS,
    BenchOptions,
    Workload,
    bench_of,
    default_sizes,
    matrix_fields,
)
from gpulab.diagnostics.bench_plot import plot, require_matplotlib
from gpulab.diagnostics.devices import device_summary
from gpulab.diagnostics.progress import Progress
from gpulab.kernels import DeviceArray, DeviceSession, Input, OwnedArray
from gpulab.placement import choose_device
from gpulab.vk import Device, TimestampQueryPool

TRIALS = 3
TARGET_SECONDS = 0.05
"""Each timed submission aims at about this much GPU work (repeats are chosen to match)."""
MAX_REPEAT = 200
OVERHEAD_DISPATCHES = 1000


class _ReusedScratch:
    """Scratch for repeated records of one op: the k-th request of each record gets the same
    buffer (the barriers between records order the reuse)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.arrays: list[OwnedArray] = []
        self.index = 0

    def __call__(self, nbytes: int) -> DeviceArray:
        elements = max(1, math.ceil(nbytes / 4))
        if self.index == len(self.arrays):
            self.arrays.append(OwnedArray(self.device, (elements,), mappable=False))
        array = self.arrays[self.index]
        if array.array.size < elements:
            array.close()
            array = self.arrays[self.index] = OwnedArray(self.device, (elements,), mappable=False)
        self.index += 1
        return array.array

    def close(self) -> None:
        for array in self.arrays:
            array.close()
        self.arrays = []


class VulkanBench:
    """Times recorded ops on one device with timestamp queries."""

    def __init__(self, device_index: int) -> None:
        self.session = DeviceSession(device_index)
        try:
            if self.session.info.timestamp_valid_bits == 0:
                raise BackendUnavailable(f"{self.session.info.name} has no timestamps on its queue")
            self.queries = TimestampQueryPool(self.session.device, 2)
        except BaseException:
            self.session.close()
            raise
        self.device = self.session.device
        self.kernels = self.session.kernels
        self.cmd = self.session.submitter.command
        self.fence = self.session.submitter.fence

    def _submit(self) -> tuple[float, float]:
        """(GPU seconds between the timestamps, wall seconds of submit + wait)."""
        start = time.perf_counter()
        self.device.submit(self.cmd, self.fence)
        self.fence.wait()
        wall = time.perf_counter() - start
        self.fence.reset()
        return self.queries.elapsed_ns(0, 1) * 1e-9, wall

    def _record(
        self,
        op: str,
        inputs: dict[str, Input],
        out: DeviceArray,
        *,
        params: dict[str, Any],
        scratch: _ReusedScratch,
        repeat: int,
    ) -> int:
        cmd = self.cmd
        cmd.begin()
        cmd.reset_queries(self.queries)
        cmd.barrier("compute", "compute")
        cmd.write_timestamp(self.queries, 0)
        dispatches = 0
        for _ in range(repeat):
            scratch.index = 0
            recorded = self.kernels.record(cmd, op, inputs, out, params=params, scratch=scratch)
            dispatches += recorded.dispatches
        cmd.write_timestamp(self.queries, 1)
        cmd.end()
        return dispatches

    def _fill(self, array: DeviceArray, value: float, step: float, period: int) -> None:
        self.cmd.begin()
        self.kernels.record(
            self.cmd, "fill", {"value": value}, array, params={"step": step, "period": period}
        )
        self.cmd.end()
        self.session.submitter.submit()

    def measure(self, workload: Workload) -> dict[str, Any]:
        """One row: best GPU time per op over TRIALS submissions of `repeat` records."""
        owned: list[OwnedArray] = []
        scratch = _ReusedScratch(self.device)

        def array(shape: tuple[int, ...], value: float) -> DeviceArray:
            created = OwnedArray(self.device, shape, mappable=False)
            owned.append(created)
            self._fill(created.array, value, 1e-3, 1021)
            return created.array

        try:
            op = workload.op
            params: dict[str, Any] = dict(workload.bench.params)
            inputs: dict[str, Input] = {
                name: (value if isinstance(value, float) else array(*value))
                for name, value in workload.inputs.items()
            }
            out = array(workload.out_shape, 0.0)
            self._record(op, inputs, out, params=params, scratch=scratch, repeat=1)
            single, _ = self._submit()
            repeat = max(1, min(MAX_REPEAT, int(TARGET_SECONDS / max(single, 1e-6))))
            dispatches = self._record(
                op, inputs, out, params=params, scratch=scratch, repeat=repeat
            )
            timings = [self._submit() for _ in range(TRIALS)]
            gpu = min(t for t, _ in timings) / repeat
            wall = min(w for _, w in timings) / repeat
        finally:
            self.device.wait_idle()
            scratch.close()
            for created in owned:
                created.close()
        return _row(workload, "vulkan", gpu, wall) | {
            "repeat": repeat,
            "dispatches_per_op": dispatches // repeat,
        }

    def _record_seconds(self, steps: list[tuple[str, dict[str, Input], DeviceArray]]) -> float:
        """Python seconds per record() of `steps`, recorded in order into one command buffer
        (not submitted)."""
        cmd = self.cmd
        cmd.begin()
        start = time.thread_time()
        for op, inputs, out in steps:
            self.kernels.record(cmd, op, inputs, out)
        seconds = (time.thread_time() - start) / len(steps)
        cmd.end()
        return seconds

    def overhead(self) -> dict[str, Any]:
        """GPU and recording time per dispatch in a batch, and one submit + wait.

        Recording is timed three ways: the same op on the same arrays (nothing to bind again),
        two ops on two pairs of arrays in turn (a pipeline and a cached descriptor set bound
        per dispatch), and every dispatch on arrays not seen before (a descriptor set
        allocated and written per dispatch). Recording runs on this thread only, so its
        cost is this thread's CPU time: on a busy host, wall time adds what else ran.
        """
        step = max(4, self.device.info.min_storage_buffer_offset_alignment // 4)
        with (
            OwnedArray(self.device, (4,), mappable=False) as x,
            OwnedArray(self.device, (4,), mappable=False) as out,
            OwnedArray(self.device, (4,), mappable=False) as other,
            OwnedArray(self.device, (OVERHEAD_DISPATCHES * step,), mappable=False) as fresh,
        ):
            inputs: dict[str, Input] = {"x": x.array, "a": 2.0}
            pair: list[tuple[str, dict[str, Input], DeviceArray]] = [
                ("scale", inputs, out.array),
                ("add", {"x": out.array, "y": x.array}, other.array),
            ]
            self._record_seconds(pair)  # makes the pipelines: not part of recording
            cmd = self.cmd
            cmd.begin()
            cmd.reset_queries(self.queries)
            cmd.write_timestamp(self.queries, 0)
            start = time.thread_time()
            for _ in range(OVERHEAD_DISPATCHES):
                self.kernels.record(cmd, "scale", inputs, out.array)
            recording = (time.thread_time() - start) / OVERHEAD_DISPATCHES
            cmd.write_timestamp(self.queries, 1)
            cmd.end()
            gpu = min(self._submit()[0] for _ in range(TRIALS)) / OVERHEAD_DISPATCHES
            cmd.begin()
            cmd.reset_queries(self.queries)
            cmd.write_timestamp(self.queries, 0)
            self.kernels.record(cmd, "scale", inputs, out.array)
            cmd.write_timestamp(self.queries, 1)
            cmd.end()
            round_trip = min(self._submit()[1] for _ in range(20))
            self.device.wait_idle()
            rebinding = self._record_seconds(pair * (OVERHEAD_DISPATCHES // 2))
            unseen = [
                DeviceArray(fresh.buffer, (4,), 4 * step * i) for i in range(OVERHEAD_DISPATCHES)
            ]
            first_use = self._record_seconds(
                [("scale", {"x": array, "a": 2.0}, out.array) for array in unseen]
            )
        return {
            "op": "dispatch_overhead",
            "n": OVERHEAD_DISPATCHES,
            "backend": "vulkan",
            "gbps": None,
            "time_ms": gpu * 1e3,
            "gpu_us_per_dispatch": gpu * 1e6,
            "record_us_per_dispatch": recording * 1e6,
            "record_rebind_us_per_dispatch": rebinding * 1e6,
            "record_fresh_us_per_dispatch": first_use * 1e6,
            "submit_wait_us": round_trip * 1e6,
        }

    def close(self) -> None:
        """Release the timestamp queries, then the session (kernels, device)."""
        self.queries.close()
        self.session.close()


def _row(workload: Workload, backend: str, gpu: float, wall: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "op": workload.op,
        "n": workload.n,
        "backend": backend,
        "gbps": workload.bytes_moved / gpu / 1e9,
        "time_ms": gpu * 1e3,
        "bytes": workload.bytes_moved,
    }
    if wall is not None:
        row["wall_ms"] = wall * 1e3
    if workload.matrix:
        row |= matrix_fields(workload, gpu)
    return row


def _workloads(
    ops: list[str],
    sizes: list[int] | None,
    device_local_bytes: int,
    shapes: Sequence[tuple[int, int, int]] = (),
) -> list[Workload]:
    """Copy first (the peak of this run), at the vector sizes asked for, else at the default
    sizes; then every op at its sizes, matmul also at `shapes`."""
    vector_sizes = sizes if sizes is not None and any(o in VECTOR_OPS for o in ops) else None
    copy_sizes = vector_sizes or default_sizes("copy", device_local_bytes)
    result = [Workload("copy", 4 * math.ceil(n / 4)) for n in copy_sizes]
    for op in dict.fromkeys(o for o in ops if o != "copy"):
        op_sizes = sizes if sizes is not None else default_sizes(op, device_local_bytes)
        result.extend(Workload(op, n) for n in op_sizes)
        if bench_of(op).shapes:
            result.extend(Workload(op, max(dims), dims) for dims in shapes)
    return result


def run_bench(options: BenchOptions, warn: Callable[[str], None]) -> dict[str, Any]:
    """Measure every workload; returns {device, rows, copy_peak_gbps}. `warn` gets a line
    when the device asked for is questionable."""
    library: Library | None = load_library(options.compare) if options.compare else None
    choice = choose_device(options.device)
    if choice.warning is not None:
        warn(choice.warning)
    bench = VulkanBench(choice.index)
    try:
        info = bench.device.info
        workloads = _workloads(options.ops, options.sizes, info.device_local_bytes, options.shapes)
        for workload in workloads:
            if workload.device_bytes > info.device_local_bytes:
                raise ValueError(
                    f"bench: {workload.op} at size {workload.label} needs {workload.device_bytes} "
                    f"bytes, more than {info.name} has ({info.device_local_bytes})"
                )
        progress = Progress(len(workloads) * (2 if library else 1) + (1 if options.overhead else 0))
        rows: list[dict[str, Any]] = []
        for workload in workloads:
            progress.step(f"vulkan {workload.op} n={workload.label}")
            rows.append(bench.measure(workload))
            if library is not None:
                progress.step(f"{library.name} {workload.op} n={workload.label}")
                rows.append(library.measure(workload))
        if options.overhead:
            progress.step("dispatch overhead")
            rows.append(bench.overhead())
        progress.finish()
        summary = device_summary(info, full=False) | {"chosen_by": choice.chosen_by}
    finally:
        bench.close()
    copies = [r["gbps"] for r in rows if r["op"] == "copy" and r["backend"] == "vulkan"]
    peak = max(copies, default=0.0)
    for row in rows:
        row["device"] = summary["name"]
        if row["gbps"] is not None and peak:
            row["pct_of_copy_peak"] = 100 * row["gbps"] / peak
    if library is not None:
        theirs = {_key(r): r for r in rows if r["backend"] == library.name}
        for row in rows:
            other = theirs.get(_key(row))
            if row["backend"] == "vulkan" and other is not None:
                row[f"vs_{library.name}"] = other["time_ms"] / row["time_ms"]
    return {"device": summary, "copy_peak_gbps": peak, "rows": rows}


def _key(row: dict[str, Any]) -> tuple[str, int, tuple[int, ...]]:
    """What makes two rows the same measurement (op, size, matmul's shape)."""
    return row["op"], row["n"], tuple(row.get("shape", ()))


def _size_label(row: dict[str, Any]) -> str:
    shape = row.get("shape", [])
    return "x".join(map(str, shape)) if len(shape) == 3 and len(set(shape)) > 1 else str(row["n"])


def table(result: dict[str, Any]) -> str:
    """A text table of the rows."""
    lines = [
        f"device: {result['device']['name']} ({result['device']['driver']}); "
        f"copy peak {result['copy_peak_gbps']:.0f} GB/s",
        f"{'op':<10} {'n':>12} {'backend':<7} {'time_ms':>10} {'wall_ms':>10} {'GB/s':>8} "
        f"{'%peak':>6} {'ratio':>6}",
    ]
    for row in result["rows"]:
        if row["op"] == "dispatch_overhead":
            lines.append(
                f"dispatch overhead: {row['gpu_us_per_dispatch']:.2f} us GPU per batched dispatch, "
                f"{row['record_us_per_dispatch']:.1f} us Python recording per dispatch "
                f"({row['record_rebind_us_per_dispatch']:.1f} binding pipeline and set each "
                f"time, {row['record_fresh_us_per_dispatch']:.1f} on arrays not seen before), "
                f"{row['submit_wait_us']:.0f} us per submit + fence wait"
            )
            continue
        ratio = next((v for k, v in row.items() if k.startswith("vs_")), None)
        lines.append(
            f"{row['op']:<10} {_size_label(row):>12} {row['backend']:<7} {row['time_ms']:>10.4f} "
            f"{row.get('wall_ms', float('nan')):>10.4f} {row['gbps']:>8.1f} "
            f"{row.get('pct_of_copy_peak', float('nan')):>6.1f} "
            f"{'' if ratio is None else f'{ratio:.2f}x':>6}"
            + (f"  {row['gflops']:.0f} GFLOP/s" if "gflops" in row else "")
            + (f"  {row['sweep_ms']:.4f} ms/sweep" if "sweep_ms" in row else "")
        )
    return "\n".join(lines)


def bench(
    options: BenchOptions,
    warn: Callable[[str], None],
    json_path: Path | None = None,
    plot_path: Path | None = None,
) -> str:
    """`gpulab bench`: measure (see run_bench), write the JSON rows and the plot where asked,
    and return the table to print."""
    if plot_path is not None:
        require_matplotlib()  # before the run, not after minutes of it
    result = run_bench(options, warn)
    if json_path is not None:
        json_path.write_text(json.dumps(result["rows"], indent=2) + "\n")
    if plot_path is not None:
        plot(result["rows"], plot_path)
    return table(result)
