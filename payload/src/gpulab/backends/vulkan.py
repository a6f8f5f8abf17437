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

Inputs the runner hands over as sources (see running/inputs.py) are made here instead of
uploaded from the host: random, fill and linspace inputs by dispatches at the start of the
recording (so every run makes them again, on the device), .npy files streamed: host threads
read their float32 data from the page cache into the staging ring while the device copies the
chunks before, every file of the segment in one pipeline (Stager.upload_files); a file whose
bytes are not the values as the buffer holds them (another dtype, Fortran order) is read by
numpy into pinned host memory and copied from there. Generated inputs that are graph outputs
are read back like the exports. A file the load did not check
(`load_graph(check_values=False)`, as `gpulab run` loads for this backend) has its values
checked where they land: one dispatch per file finds its first NaN or infinity on the device,
read back with the exports, and a bad value is the load's GraphInvalid.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import numpy.typing as npt

from gpulab._shown import shown
from gpulab.backends.base import FloatArray, OperationExecutor, Segment, SegmentRun, Values
from gpulab.backends.errors import BackendUnavailable, ExecutionFailed
from gpulab.graph import GraphInvalid, Literal, Node, Problem, nbytes
from gpulab.graph.fusion import FusedGroup, fusion_of, plan
from gpulab.graph.model import NpyFile
from gpulab.graph.npy import (
    check_read_values,
    npy_layout,
    refuse_bad_values,
    refuse_nonfinite_at,
)
from gpulab.graph.values import read_npy_into
from gpulab.kernels import (
    NO_ELEMENT,
    DeviceArray,
    DeviceSession,
    Extra,
    Input,
    Pattern,
    Recorded,
)
from gpulab.kernels.fused import Step, compile_ahead, unavailable
from gpulab.memory import Allocation, BufferPool, FileRegion, OutOfMemoryError, RegionReadError
from gpulab.ops.registry import entry
from gpulab.ops.solver import SolverReport
from gpulab.ops.user_kernel import compiles_many
from gpulab.vk import PhysicalDevice, TimestampQueryPool, VulkanError, shared_instance

if TYPE_CHECKING:
    from gpulab.backends.base import Made

CACHED_RECORDINGS = 8
"""Recorded segments kept per executor (least recently used dropped first)."""


class ValueTooLarge(OutOfMemoryError):
    """One value of the graph is larger than the device heap may hold: refused up front."""

    def __init__(self, name: str, request: int, heap: int, limit: int) -> None:
        super().__init__(request, "device", heap, 0, limit)
        self.value = name
        self.args = (f"value {shown(name)}: {self.args[0]}",)


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


class _InPlace:
    """Which value a node may be written in place of: a fused group's written member, one the
    group reads; a node alone whose recording writes in place (`writes_in_place`: gpulab's
    elementwise ops, kernels.op_recordings.IN_PLACE), one it reads. Of the node's shape, that
    no node reads after the group's anchor (the node) and nothing keeps (an export, a value
    read back), either an input (made again every run) or a passing result; each at most
    once. The group's shader loads every element before it stores any (gpulab.kernels.fused),
    element by element, so the member may overwrite it: the graph then holds one vector less
    on the device (saxpy of two inputs: a third less)."""

    def __init__(
        self,
        segment: Segment,
        pinned: set[str],
        member_of: Mapping[str, FusedGroup],
        writes_in_place: Callable[[str], bool],
    ) -> None:
        self.segment = segment
        self.writes_in_place = writes_in_place
        self.pinned = pinned
        # Where each node's reads happen: a group member reads in its group's dispatch, at
        # the anchor (which may come after nodes recorded between the members).
        order = {node.id: index for index, node in enumerate(segment.nodes)}
        self.position = {
            node.id: order[member_of[node.id].anchor.id] if node.id in member_of else index
            for index, node in enumerate(segment.nodes)
        }
        self.last_read: dict[str, int] = {}
        for node in segment.nodes:
            for argument in node.inputs.values():
                if not isinstance(argument, Literal):
                    last = self.last_read.get(argument.name, -1)
                    self.last_read[argument.name] = max(last, self.position[node.id])
        self.donated: set[str] = set()
        self.over_input: dict[str, str] = {}
        """Each value written over an input (directly or over such a value), with the input,
        whose memory stays held to the end."""

    def donor(
        self,
        node: Node,
        group: FusedGroup | None,
        passing: Mapping[str, Allocation],
        held: Mapping[str, Allocation],
    ) -> str | None:
        """Whose memory `node` (a member of `group`, or alone: None) takes: a passing value's
        name, or the held input's (also when the value it overwrites lies over that input);
        None: memory of its own."""
        if group is None and not self.writes_in_place(node.op):
            return None
        members, ids = (group.nodes, group.ids) if group is not None else ([node], (node.id,))
        segment = self.segment
        end = self.position[group.anchor.id if group is not None else node.id]  # the dispatch
        for member in members:
            for argument in member.inputs.values():
                if isinstance(argument, Literal):
                    continue
                name = argument.name
                if (
                    name in ids
                    or name in self.donated
                    or name in segment.exports
                    or name in segment.graph.output_set  # a generated input read back
                    or name in self.pinned
                    or self.last_read[name] > end
                    or segment.graph.shape(name) != node.shape
                ):
                    continue
                if name in passing:
                    self.donated.add(name)
                    return name
                if (name in segment.reads and name in held) or name in self.over_input:
                    self.donated.add(name)
                    self.over_input[node.id] = self.over_input.get(name, name)
                    return self.over_input[node.id]
        return None


def _holding(array: DeviceArray, scratch: list[Allocation]) -> Allocation:
    """The allocation `array` lies in (an op's extra output is in its scratch, or a value
    kept to the end of the run)."""
    for allocation in scratch:
        if allocation.buffer is array.buffer:
            return allocation
    raise ExecutionFailed("an extra output of a recorded op is not in its scratch memory")


class _Recording:
    """One segment recorded on the device, with the buffers its commands use."""

    def __init__(
        self,
        executor: VulkanExecutor,
        segment: Segment,
        patterns: Mapping[str, Pattern],
        streamed: frozenset[str],
        checked: frozenset[str] = frozenset(),
    ) -> None:
        self.executor = executor
        self.segment = segment
        self.patterns = dict(patterns)
        """Inputs generated by the recording's first dispatches."""
        self.streamed = streamed
        """The .npy inputs this executor reads from their files (the others come as values)."""
        self.checked = checked
        """Those whose values the recording checks (first_nonfinite), each into a verdict."""
        self.verdicts: dict[str, Allocation] = {}
        session = executor.session
        device = session.device
        self.pool = BufferPool(session.manager, budget_bytes=executor.device_budget)
        self.held: dict[str, Allocation] = {}
        self.extras: list[tuple[Node, dict[str, tuple[Allocation, Extra]]]] = []
        """Each node's extra outputs (Recorded.extras) in the scratch kept for them."""
        self.made_inputs: dict[str, dict[str, str]] = {}
        """How the last run moved each .npy input (SegmentRun.made)."""
        self.queries: TimestampQueryPool | None = None
        self.groups = executor.fused_groups(segment)
        """The nodes recorded together (gpulab.graph.fusion), each as one shader."""
        self.dispatches = 0
        """The dispatches the nodes record (the generated inputs' not counted)."""
        self.command = session.submitter.allocate()
        try:
            if device.info.timestamp_valid_bits:
                # One before and one after the generated inputs, one after each node.
                self.queries = TimestampQueryPool(device, len(segment.nodes) + 2)
            self._record_compiled_together()
        except BaseException:
            self.close()
            raise
        self.evictions = self.pool.evictions

    @property
    def intact(self) -> bool:
        """False once the pool destroyed a cached buffer that the commands still use."""
        return self.pool.evictions == self.evictions

    def _acquire(self, shape: tuple[int, ...], label: str, kind: str = "device") -> Allocation:
        return self.pool.acquire(max(nbytes(shape), 4), kind, label=label)

    def _read_kind(self, name: str) -> str:
        """The memory kind of read `name`'s buffer: a .npy input read here from its file
        prefers device memory the host can map (ReBAR VRAM), which Stager.upload_file then
        reads the file straight into; on a device without it, the same memory as any other."""
        return "device_mapped" if name in self.streamed else "device"

    def _record_compiled_together(self) -> None:
        """_record, the fused groups' new shaders compiled in one compiler process: a first
        pass records everything but those and gathers their sources, which are compiled at
        once (fused.compile_ahead: glslc's start-up is most of a small shader's compile), and
        a second pass records the segment whole, on the buffers the first one gave back. A
        segment whose shaders were all compiled before is recorded once."""
        kernels = self.executor.session.kernels
        if not self.groups or not compiles_many():
            self._record()
            return
        with kernels.gathering() as new:
            self._record()
        if not new:
            return
        compile_ahead(new)
        self._give_back()
        self._record()

    def _held_allocations(self) -> list[Allocation]:
        """What _record holds to the end: the reads, the kept values, the extra outputs'
        scratch and the verdicts, each once (a value over an input shares its allocation)."""
        kept = [allocation for _, extras in self.extras for allocation, _ in extras.values()]
        every = [*self.held.values(), *kept, *self.verdicts.values()]
        return list({id(allocation): allocation for allocation in every}.values())

    def _give_back(self) -> None:
        """Release what _record acquired into the pool (which keeps the buffers for the next
        pass) and forget what it recorded."""
        for allocation in self._held_allocations():
            self.pool.release(allocation)
        self.held, self.extras, self.verdicts = {}, [], {}
        self.dispatches = 0

    def _record(self) -> None:
        segment, cmd = self.segment, self.command
        arrays: dict[str, DeviceArray] = {}
        for name in segment.reads:
            shape = segment.graph.shape(name)
            self.held[name] = self._acquire(shape, f"read {name}", self._read_kind(name))
            arrays[name] = DeviceArray.of(self.held[name], shape)
        cmd.begin()
        if self.queries is not None:
            cmd.reset_queries(self.queries)
        cmd.barrier("transfer", "compute")  # the uploads of this run's reads
        cmd.barrier("host", "compute")
        if self.queries is not None:
            cmd.write_timestamp(self.queries, 0)
        for name in sorted(self.checked):
            self.verdicts[name] = self._acquire((1,), f"check {name}")
            verdict = DeviceArray.of(self.verdicts[name], (1,))
            self.executor.session.kernels.first_nonfinite(cmd, arrays[name], verdict)
        for name, pattern in self.patterns.items():
            self.executor.session.kernels.generate(cmd, pattern, arrays[name])
        if self.queries is not None:
            cmd.write_timestamp(self.queries, 1)
        passing: dict[str, Allocation] = {}
        member_of = {node_id: group for group in self.groups for node_id in group.ids}
        # A value a group reuses as a prepared scalar is an extra output of that group's
        # member, read after the run: it stays held to the end.
        pinned = {node_id for group in self.groups for _, _, node_id in group.reused}
        # While a group is open (a member seen, its anchor not yet recorded), no value goes
        # back to the pool: the group's shader, recorded at the anchor, still reads them.
        open_groups: set[int] = set()
        deferred: list[str] = []
        in_place = _InPlace(
            segment, pinned, member_of, self.executor.session.kernels.writes_in_place
        )
        for index, node in enumerate(segment.nodes):
            group = member_of.get(node.id)
            if group is None or node.id in group.written:
                kept = node.id in segment.exports or node.id in pinned
                donor = None if kept else in_place.donor(node, group, passing, self.held)
                allocation = self._value_memory(node, kept, donor, passing)
                arrays[node.id] = DeviceArray.of(allocation, node.shape)
            if group is None:
                self._record_one(node, arrays)
            elif node is group.anchor:
                self.dispatches += self._record_group(group, arrays)
                open_groups.discard(id(group))
            else:
                open_groups.add(id(group))
            if self.queries is not None:
                cmd.write_timestamp(self.queries, index + 2)
            deferred.extend(segment.releases.get(node.id, ()))
            if not open_groups:
                for name in deferred:
                    if name in passing:
                        self.pool.release(passing.pop(name))
                deferred.clear()
        cmd.barrier("compute", "transfer")
        cmd.barrier("compute", "host")
        cmd.end()

    def _value_memory(
        self, node: Node, kept: bool, donor: str | None, passing: dict[str, Allocation]
    ) -> Allocation:
        """Where `node`'s value goes: memory of its own (held to the end when `kept`, else
        passing, back to the pool after its last reader), or its donor's (see _InPlace)."""
        if donor is None:
            allocation = self._acquire(node.shape, f"node {node.id}")
            if kept:
                self.held[node.id] = allocation
            else:
                passing[node.id] = allocation
            return allocation
        if donor in passing:  # a passing value the group reads last: its memory is node's now
            passing[node.id] = passing.pop(donor)
            return passing[node.id]
        return self.held[donor]  # an input's, which stays held (and so is never released)

    def _record_one(self, node: Node, arrays: Mapping[str, DeviceArray]) -> None:
        """Record `node` alone; the scratch holding an extra output stays until the recording
        goes, the rest goes back to the pool now."""
        scratch: list[Allocation] = []
        recorded = self._record_node(node, arrays, scratch)
        self.dispatches += recorded.dispatches
        kept = {
            name: (_holding(extra.array, scratch), extra) for name, extra in recorded.extras.items()
        }
        if kept:
            self.extras.append((node, kept))
        held = [allocation for allocation, _ in kept.values()]
        for used in scratch:
            if not any(used is allocation for allocation in held):
                self.pool.release(used)

    def _record_group(self, group: FusedGroup, arrays: Mapping[str, DeviceArray]) -> int:
        """Record a fused group as one shader, at its anchor (gpulab.kernels.fused); its
        dispatches. The scratch holding a member's extra output (normalize's norm) stays
        until the recording goes, the rest goes back to the pool now."""
        scratch: list[Allocation] = []

        def take(count: int) -> DeviceArray:
            allocation = self.pool.acquire(max(count, 4), label=f"scratch {group.anchor.id}")
            scratch.append(allocation)
            return DeviceArray.of(allocation, (max(count, 4) // 4,))

        ids = set(group.ids)
        steps = []
        for node in group.nodes:
            fusion = fusion_of(node)
            assert fusion is not None
            inputs = {
                name: (
                    argument.value
                    if isinstance(argument, Literal)
                    else argument.name
                    if argument.name in ids
                    else arrays[argument.name]
                )
                for name, argument in node.inputs.items()
            }
            out = arrays[node.id] if node.id in group.written else None
            steps.append(Step(node.id, fusion, inputs, out))
        given = {(member, name): arrays[node_id] for member, name, node_id in group.reused}
        try:
            recorded = self.executor.session.kernels.record_fused(
                self.command, steps, scratch=take, given=given
            )
        except ValueError as exc:
            for used in scratch:
                self.pool.release(used)
            raise ExecutionFailed(f"nodes {', '.join(group.ids)} (fused): {exc}") from exc
        held: list[Allocation] = []
        for node in group.nodes:
            extras = recorded.extras.get(node.id)
            if extras:
                places = [*scratch, *self.held.values()]
                kept = {name: (_holding(x.array, places), x) for name, x in extras.items()}
                self.extras.append((node, kept))
                held.extend(allocation for allocation, _ in kept.values())
        for used in scratch:
            if not any(used is allocation for allocation in held):
                self.pool.release(used)
        return recorded.dispatches

    def _record_node(
        self, node: Node, arrays: Mapping[str, DeviceArray], scratch: list[Allocation]
    ) -> Recorded:
        def take(count: int) -> DeviceArray:
            allocation = self.pool.acquire(max(count, 4), label=f"scratch {node.id}")
            scratch.append(allocation)
            return DeviceArray.of(allocation, (max(count, 4) // 4,))

        inputs: dict[str, Input] = {
            name: (argument.value if isinstance(argument, Literal) else arrays[argument.name])
            for name, argument in node.inputs.items()
        }
        try:
            return self.executor.session.kernels.record(
                self.command,
                node.op,
                inputs,
                arrays[node.id],
                params=dict(node.params),
                scratch=take,
            )
        except ValueError as exc:
            raise ExecutionFailed(f"node {shown(node.id)}: {exc}") from exc

    def run(self, values: Mapping[str, FloatArray], files: Mapping[str, NpyFile]) -> SegmentRun:
        """Upload `values` (and read `files` into their buffers), submit, read back."""
        executor = self.executor
        files_ms = 0.0
        self.made_inputs = {}
        start = time.perf_counter()
        from_files = [name for name in self.segment.reads if name in files]
        for name in self.segment.reads:
            if name in self.patterns or name in files:
                continue
            data = np.ascontiguousarray(values[name], dtype=np.float32)
            executor.session.stager.upload(data, self.held[name])
        if from_files:
            files_ms += self._upload_files(from_files, files)
        submitted = time.perf_counter()
        executor.session.submitter.submit(self.command)
        finished = time.perf_counter()
        wall_ms = (finished - submitted) * 1e3
        for name, verdict in self.verdicts.items():
            (index,) = executor.session.stager.download(verdict, (1,), np.uint32)
            if index != NO_ELEMENT:
                refuse_nonfinite_at(name, files[name], int(index), self.segment.graph.shape(name))
        # Each op's entry reads its extra outputs: a report, or NumericalError (a zero norm).
        solvers: dict[str, SolverReport] = {}
        for node, kept in self.extras:
            values = {
                name: extra.read(
                    executor.session.stager.download(allocation, extra.array.shape), node.params
                )
                for name, (allocation, extra) in kept.items()
            }
            report = entry(node.op).checked(node.id, values)
            if report is not None:
                solvers[node.id] = report
        graph = self.segment.graph
        outputs = [name for name in self.patterns if name in graph.output_set]
        exported = {
            name: executor.session.stager.download(self.held[name], graph.shape(name))
            for name in (*self.segment.exports, *outputs)
        }
        times, timer, gpu_ms, generate_ms = self._times(wall_ms)
        phases = {
            # A file's read into pinned memory is an input's making, not its upload; a
            # streamed file's read overlaps its copies: both are the upload.
            "upload_ms": (submitted - start) * 1e3 - files_ms,
            "gpu_ms": gpu_ms,
            "readback_ms": (time.perf_counter() - finished) * 1e3,
        }
        if self.patterns or files:
            phases["inputs_ms"] = files_ms + generate_ms
        return SegmentRun(
            exported,
            times,
            timer,
            phases=phases,
            solvers=solvers,
            dispatches=self.dispatches,
            fused=[list(group.ids) for group in self.groups],
            made=self.made_inputs,
        )

    def _upload_files(self, names: list[str], files: Mapping[str, NpyFile]) -> float:
        """Move the .npy inputs `names` into their buffers: those whose bytes are the values
        streamed, together (Stager.upload_files), the others read into pinned memory first;
        the ms of those reads (a streamed file's read is part of the upload). How each went is
        noted in self.made_inputs for the result's `inputs`."""
        read_ms = 0.0
        streamed: list[str] = []
        regions: list[FileRegion] = []
        with contextlib.ExitStack() as opened:
            for name in names:
                source = files[name]
                stream = opened.enter_context(source.path.open("rb"))
                region = self._region(name, source, stream)
                if region is None:
                    read_ms += self._upload_pinned(name, source)
                else:
                    streamed.append(name)
                    regions.append(region)
            try:
                self.executor.session.stager.upload_files(regions)
            except RegionReadError as failed:
                name = streamed[failed.region]
                problem = f"{files[name].shown_as}: cannot be read ({failed.error})"
                raise GraphInvalid([Problem(f"inputs.{name}.file", problem)]) from None
        return read_ms

    def _region(self, name: str, source: NpyFile, stream: BinaryIO) -> FileRegion | None:
        """The region of the file open in `stream` that holds input `name`'s float32 values as its
        buffer holds them (None, with the reason in self.made_inputs, when it holds them
        otherwise); its values checked chunk by chunk as they arrive unless the load or the
        device checks them."""
        shape = self.segment.graph.shape(name)
        try:
            layout = npy_layout(stream)
            why = layout.why_not_streamed()
        except ValueError as exc:
            why = f"its header is not one this reader takes ({exc})"
        if why is None and layout.shape != shape:
            why = f"it now holds shape {list(layout.shape)}"  # changed since the load
        if why is not None:
            self.made_inputs[name] = {"read": "pinned", "not_streamed": why}
            return None
        self.made_inputs[name] = {"read": "streamed"}

        def inspect(chunk: npt.NDArray[np.uint8], start: int) -> None:
            refuse_bad_values(name, source, chunk.view(np.float32), start // 4, shape)

        unchecked = not source.values_checked and name not in self.checked
        held = self.held[name]
        file = stream.fileno()
        return FileRegion(file, layout.offset, nbytes(shape), held, inspect if unchecked else None)

    def _upload_pinned(self, name: str, source: NpyFile) -> float:
        """Read a file that cannot be streamed (and cast, or transpose it) by numpy straight
        into pinned memory, then copy it in one go; the ms of the read."""
        stager = self.executor.session.stager
        pinned = stager.pinned_empty(self.segment.graph.shape(name))
        try:
            start = time.perf_counter()
            read_npy_into(source.path, pinned)
            check_read_values(name, source, pinned)
            read_ms = (time.perf_counter() - start) * 1e3
            stager.upload(pinned, self.held[name])
        finally:
            pinned.free()
        return read_ms

    def _times(self, wall_ms: float) -> tuple[dict[str, float], str, float, float]:
        """Each node's ms, the timer, the nodes' device ms, and the ms the generated inputs
        took on the device (0 unless timed). Timestamps: before the generation, then after
        it and after each node."""
        ids = [node.id for node in self.segment.nodes]
        if self.queries is None:
            # No timestamps on this queue: every node reports its whole submission.
            return dict.fromkeys(ids, wall_ms), "submission", wall_ms, 0.0
        ticks = self.queries.results()
        period = self.executor.session.info.timestamp_period_ns
        times = {
            node_id: (ticks[i + 2] - ticks[i + 1]) * period / 1e6 for i, node_id in enumerate(ids)
        }
        gpu_ms = (ticks[len(ids) + 1] - ticks[1]) * period / 1e6
        return times, "gpu", gpu_ms, (ticks[1] - ticks[0]) * period / 1e6

    def close(self) -> None:
        for allocation in self._held_allocations():
            if not allocation.freed:
                allocation.free()
        self.held, self.extras, self.verdicts = {}, [], {}
        self.pool.close()
        if self.queries is not None:
            self.queries.close()
        self.command.close()


class VulkanExecutor(OperationExecutor):
    """Runs segments on one Vulkan device (see the module docstring)."""

    name = "vulkan"

    def __init__(
        self,
        index: int = 0,
        memory_budget: int | None = None,
        fuse: bool = True,
        *,
        chosen_by: str | None = None,
    ) -> None:
        self.index = index
        self.chosen_by = chosen_by
        """What chose the device (placement.device_choice), reported with it when known."""
        self.fuse = fuse
        """Whether chains of elementwise ops and their reduction run as one shader."""
        self.session = DeviceSession(physical_device(index), memory_budget=memory_budget)
        """The device and what works on it: memory manager, stager, kernels, submitter."""
        self.heap_limits = self.session.heap_limits
        heaps = self.session.info.memory_heaps
        local = [heap.index for heap in heaps if heap.device_local] or [h.index for h in heaps]
        self.device_heap = max(local, key=lambda index: self.heap_limits[index])
        """The device-local heap with the most room: where a too-large value is reported."""
        self.device_budget = sum(self.heap_limits[index] for index in local)
        """Device-local bytes this executor may use (the heaps, or --memory-budget each)."""
        self._recordings: OrderedDict[str, _Recording] = OrderedDict()
        self.recorded = 0
        """How many times a segment was recorded (replays do not count)."""

    @property
    def device(self) -> dict[str, Any]:
        info = self.session.info
        summary = {
            "index": self.index,
            "name": info.name,
            "type": info.type,
            "driver": info.driver,
            "api_version": info.api_version,
        }
        if self.chosen_by is not None:
            summary["chosen_by"] = self.chosen_by
        return summary

    def cannot_generate(self, pattern: Pattern, count: int) -> str | None:
        return self.session.kernels.cannot_generate(pattern, count)

    @property
    def fusion(self) -> str:
        if not self.fuse:
            return "off (--no-fuse)"
        why = unavailable()
        return "on" if why is None else f"off: {why}"

    def fused_groups(self, segment: Segment) -> tuple[FusedGroup, ...]:
        """The groups of `segment` recorded as one shader each (none with fusion off): the
        plan's, less those this device cannot record so (they run node by node)."""
        if not self.fuse or unavailable() is not None:
            return ()
        kept = []
        for group in plan(segment.nodes, segment.exports):
            numbers = sum(
                isinstance(argument, Literal)
                for node in group.nodes
                for argument in node.inputs.values()
            )
            count = math.prod(group.nodes[0].shape)
            reduces = group.anchor.shape == ()  # a reduction's result is a scalar
            if self.session.kernels.cannot_fuse(count, numbers, reduces) is None:
                kept.append(group)
        return tuple(kept)

    def _recording(
        self,
        segment: Segment,
        generated: Mapping[str, Pattern],
        streamed: frozenset[str],
        checked: frozenset[str],
    ) -> _Recording:
        # The generating dispatches are part of the recording, and so is which of the
        # generated inputs it reads back (graph outputs), and which reads come from files
        # (their buffers' memory) and which it checks: all go into its key.
        outputs = sorted(name for name in generated if name in segment.graph.output_set)
        files = f"{sorted(streamed)}:{sorted(checked)}"
        key = f"{segment.key}:{sorted(generated.items(), key=repr)!r}:{outputs}:{files}"
        cached = self._recordings.pop(key, None)
        if cached is not None and not cached.intact:
            cached.close()
            cached = None
        if cached is None:
            cached = _Recording(self, segment, generated, streamed, checked)
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

    def execute(self, segment: Segment, values: Values, made: Made = None) -> SegmentRun:
        """Run `segment`; the inputs in `made` are made here (patterns generated on the
        device, files read into pinned memory), the other reads come from `values`."""
        self.check_fits(segment)
        generated: dict[str, Pattern] = {}
        files: dict[str, NpyFile] = {}
        for name, source in (made or {}).items():
            if isinstance(source, NpyFile):
                files[name] = source
            else:
                generated[name] = source
        start = time.perf_counter()
        # Recorded on first use, else a replay.
        # A file the load left unchecked is checked on the device (unless too long for the
        # kernel's 32-bit index: then on the host, as it is read).
        checked = frozenset(
            name
            for name, source in files.items()
            if not source.values_checked and math.prod(segment.graph.shape(name)) < NO_ELEMENT
        )
        recording = self._recording(segment, generated, frozenset(files), checked)
        record_ms = (time.perf_counter() - start) * 1e3
        try:
            done = recording.run(values, files)
        except MemoryError:
            # Out of memory while uploading: the recording's buffers go back now, not when
            # it ages out of the cache, and so do the blocks they emptied.
            for key, cached in list(self._recordings.items()):
                if cached is recording:
                    del self._recordings[key]
            recording.close()
            self.session.manager.trim()
            raise
        done.phases["record_ms"] = record_ms
        # Pipelines this recording made are kept for the next process (a process that ends
        # in os._exit never closes the catalog, which would save them too).
        self.session.kernels.catalog.save_cache()
        return done

    def memory_stats(self) -> dict[str, Any] | None:
        stats: dict[str, Any] = self.session.manager.stats()
        return stats

    def close(self) -> None:
        if self.session.closed:
            return
        recordings, self._recordings = self._recordings, OrderedDict()
        for recording in recordings.values():
            recording.close()
        self.session.close()
