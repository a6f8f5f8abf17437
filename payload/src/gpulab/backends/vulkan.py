"""The Vulkan backend: a whole segment recorded into one command buffer, reused on every run.

Recording (once per segment shape, see `Segment.key`): graph inputs and values from other
backends get device buffers that stay with the recording; every node's result comes from the
recording's BufferPool and goes back to it right after its last reader was recorded, so later
nodes reuse that memory (Kernels.record ends each op with a compute->compute barrier, which
orders the reuse). Only exported values (outputs, reads by other backends) stay held and are
read back. GPU timestamps around each node give its time.

Running: upload the reads, one submission, wait, read back the exports. The recording is
replayed as is while its pool has evicted nothing (an eviction destroys a buffer it uses);
otherwise it is recorded again.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from gpulab.backends.base import (
    BackendUnavailable,
    ExecutionFailed,
    FloatArray,
    OperationExecutor,
    Segment,
    SegmentRun,
)
from gpulab.graph import Literal, Node, nbytes
from gpulab.kernels import DeviceArray, Input, Kernels
from gpulab.memory import Allocation, BufferPool, MemoryManager, OutOfMemoryError, Stager
from gpulab.ops import NumericalError
from gpulab.vk import (
    CommandPool,
    Device,
    Fence,
    PhysicalDevice,
    TimestampQueryPool,
    VulkanError,
    shared_instance,
)

CACHED_RECORDINGS = 8
"""Recorded segments kept per executor (least recently used dropped first)."""


class ValueTooLarge(OutOfMemoryError):
    """One value of the graph is larger than the device heap may hold: refused up front."""

    def __init__(self, name: str, request: int, heap: int, limit: int) -> None:
        super().__init__(request, "device", heap, 0, limit)
        self.value = name
        self.args = (f"value {name!r}: {self.args[0]}",)


def physical_device(index: int) -> PhysicalDevice:
    """The Vulkan device `index`, or BackendUnavailable saying what exists."""
    try:
        devices = shared_instance().physical_devices()
    except (VulkanError, OSError) as exc:
        raise BackendUnavailable(f"the Vulkan backend is unavailable: {exc}") from exc
    if not devices:
        raise BackendUnavailable("the Vulkan backend is unavailable: no Vulkan device was found")
    if index >= len(devices):
        raise BackendUnavailable(
            f"there is no Vulkan device {index} (found {len(devices)}; see gpulab devices)"
        )
    return devices[index]


class _Recording:
    """One segment recorded on the device, with the buffers its commands use."""

    def __init__(self, executor: VulkanExecutor, segment: Segment) -> None:
        self.executor = executor
        self.segment = segment
        device = executor.device_object
        self.pool = BufferPool(executor.manager, budget_bytes=executor.device_budget)
        self.held: dict[str, Allocation] = {}
        self.norms: list[tuple[Node, Allocation]] = []
        self.queries: TimestampQueryPool | None = None
        self.command = executor.commands.allocate()
        try:
            if device.info.timestamp_valid_bits:
                self.queries = TimestampQueryPool(device, len(segment.nodes) + 1)
            self._record()
        except BaseException:
            self.close()
            raise
        self.evictions = self.pool.evictions

    @property
    def intact(self) -> bool:
        """False once the pool destroyed a cached buffer that the commands still use."""
        return self.pool.evictions == self.evictions

    def _acquire(self, shape: tuple[int, ...], label: str) -> Allocation:
        return self.pool.acquire(max(nbytes(shape), 4), label=label)

    def _record(self) -> None:
        segment, cmd = self.segment, self.command
        arrays: dict[str, DeviceArray] = {}
        for name in segment.reads:
            shape = segment.graph.shape(name)
            self.held[name] = self._acquire(shape, f"read {name}")
            arrays[name] = DeviceArray.of(self.held[name], shape)
        cmd.begin()
        if self.queries is not None:
            cmd.reset_queries(self.queries)
        cmd.barrier("transfer", "compute")  # the uploads of this run's reads
        cmd.barrier("host", "compute")
        if self.queries is not None:
            cmd.write_timestamp(self.queries, 0)
        passing: dict[str, Allocation] = {}
        for index, node in enumerate(segment.nodes):
            allocation = self._acquire(node.shape, f"node {node.id}")
            if node.id in segment.exports:
                self.held[node.id] = allocation
            else:
                passing[node.id] = allocation
            arrays[node.id] = DeviceArray.of(allocation, node.shape)
            scratch: list[Allocation] = []
            self._record_node(node, arrays, scratch)
            if self.queries is not None:
                cmd.write_timestamp(self.queries, index + 1)
            if node.op == "normalize" and scratch:
                # Kernels asks for normalize's norm first: kept, to report a zero norm.
                self.norms.append((node, scratch.pop(0)))
            for used in scratch:
                self.pool.release(used)
            for name in segment.releases.get(node.id, ()):
                if name in passing:
                    self.pool.release(passing.pop(name))
        cmd.barrier("compute", "transfer")
        cmd.barrier("compute", "host")
        cmd.end()

    def _record_node(
        self, node: Node, arrays: Mapping[str, DeviceArray], scratch: list[Allocation]
    ) -> None:
        def take(count: int) -> DeviceArray:
            allocation = self.pool.acquire(max(count, 4), label=f"scratch {node.id}")
            scratch.append(allocation)
            return DeviceArray.of(allocation, (max(count, 4) // 4,))

        inputs: dict[str, Input] = {
            name: (argument.value if isinstance(argument, Literal) else arrays[argument.name])
            for name, argument in node.inputs.items()
        }
        try:
            self.executor.kernels.record(
                self.command,
                node.op,
                inputs,
                arrays[node.id],
                params=dict(node.params),
                scratch=take,
            )
        except ValueError as exc:
            raise ExecutionFailed(f"node {node.id!r}: {exc}") from exc

    def run(self, values: Mapping[str, FloatArray]) -> SegmentRun:
        executor = self.executor
        start = time.perf_counter()
        for name in self.segment.reads:
            data = np.ascontiguousarray(values[name], dtype=np.float32)
            executor.stager.upload(data, self.held[name])
        submitted = time.perf_counter()
        executor.device_object.submit(self.command, executor.fence)
        executor.fence.wait()
        executor.fence.reset()
        finished = time.perf_counter()
        wall_ms = (finished - submitted) * 1e3
        for node, norm in self.norms:
            if float(executor.stager.download(norm, ())) == 0.0:
                raise NumericalError(f"normalize: x has norm 0 (node {node.id!r})")
        exported = {
            name: executor.stager.download(self.held[name], self.segment.graph.shape(name))
            for name in self.segment.exports
        }
        times, timer, gpu_ms = self._times(wall_ms)
        phases = {
            "upload_ms": (submitted - start) * 1e3,
            "gpu_ms": gpu_ms,
            "readback_ms": (time.perf_counter() - finished) * 1e3,
        }
        return SegmentRun(exported, times, timer, phases=phases)

    def _times(self, wall_ms: float) -> tuple[dict[str, float], str, float]:
        """Each node's time, the timer it came from, and the whole segment's device time."""
        ids = [node.id for node in self.segment.nodes]
        if self.queries is None:
            # No timestamps on this queue: every node reports its whole submission.
            return dict.fromkeys(ids, wall_ms), "submission", wall_ms
        ticks = self.queries.results()
        period = self.executor.device_object.info.timestamp_period_ns
        times = {node_id: (ticks[i + 1] - ticks[i]) * period / 1e6 for i, node_id in enumerate(ids)}
        return times, "gpu", (ticks[len(ids)] - ticks[0]) * period / 1e6

    def close(self) -> None:
        for allocation in [*self.held.values(), *(norm for _, norm in self.norms)]:
            if not allocation.freed:
                allocation.free()
        self.held, self.norms = {}, []
        self.pool.close()
        if self.queries is not None:
            self.queries.close()
        self.command.close()


class VulkanExecutor(OperationExecutor):
    """Runs segments on one Vulkan device (see the module docstring)."""

    name = "vulkan"

    def __init__(self, index: int = 0, memory_budget: int | None = None) -> None:
        self.index = index
        self.device_object = Device(physical_device(index))
        heaps = self.device_object.info.memory_heaps
        self.heap_limits = {
            heap.index: heap.size if memory_budget is None else min(heap.size, memory_budget)
            for heap in heaps
        }
        local = [heap.index for heap in heaps if heap.device_local] or [h.index for h in heaps]
        self.device_heap = max(local, key=lambda index: self.heap_limits[index])
        """The device-local heap with the most room: where a too-large value is reported."""
        self.device_budget = sum(self.heap_limits[index] for index in local)
        """Device-local bytes this executor may use (the heaps, or --memory-budget each)."""
        try:
            self.manager = MemoryManager(self.device_object, heap_limits=self.heap_limits)
            self.stager = Stager(self.manager)
            self.kernels = Kernels(self.device_object)
            self.commands = CommandPool(self.device_object)
            self.fence = Fence(self.device_object)
        except BaseException:
            self.device_object.close()
            raise
        self._recordings: OrderedDict[str, _Recording] = OrderedDict()
        self.recorded = 0
        """How many times a segment was recorded (replays do not count)."""

    @property
    def device(self) -> dict[str, Any]:
        info = self.device_object.info
        return {
            "index": self.index,
            "name": info.name,
            "type": info.type,
            "driver": info.driver,
            "api_version": info.api_version,
        }

    def _recording(self, segment: Segment) -> _Recording:
        key = segment.key
        cached = self._recordings.pop(key, None)
        if cached is not None and not cached.intact:
            cached.close()
            cached = None
        if cached is None:
            cached = _Recording(self, segment)
            self.recorded += 1
        self._recordings[key] = cached
        while len(self._recordings) > CACHED_RECORDINGS:
            _, oldest = self._recordings.popitem(last=False)
            oldest.close()
        return cached

    def check_fits(self, segment: Segment) -> None:
        """OutOfMemoryError, before anything is allocated, when one value of the segment is
        larger than a device heap may hold (the memory layer catches the rest as it goes)."""
        names = (*segment.reads, *(node.id for node in segment.nodes))
        name = max(names, key=lambda n: nbytes(segment.graph.shape(n)))
        size = nbytes(segment.graph.shape(name))
        limit = self.heap_limits[self.device_heap]
        if size > limit:
            raise ValueTooLarge(name, size, self.device_heap, limit)

    def execute(self, segment: Segment, values: Mapping[str, FloatArray]) -> SegmentRun:
        self.check_fits(segment)
        start = time.perf_counter()
        recording = self._recording(segment)  # recorded on first use, else a replay
        record_ms = (time.perf_counter() - start) * 1e3
        try:
            done = recording.run(values)
        except MemoryError:
            # Out of memory while uploading: the recording's buffers go back now, not when
            # it ages out of the cache, and so do the blocks they emptied.
            self._recordings.pop(segment.key, None)
            recording.close()
            self.manager.trim()
            raise
        done.phases["record_ms"] = record_ms
        return done

    def memory_stats(self) -> dict[str, Any] | None:
        stats: dict[str, Any] = self.manager.stats()
        return stats

    def close(self) -> None:
        if self.device_object.closed:
            return
        recordings, self._recordings = self._recordings, OrderedDict()
        for recording in recordings.values():
            recording.close()
        self.fence.close()
        self.commands.close()
        self.kernels.close()
        self.stager.close()
        self.manager.close()
        self.device_object.close()
