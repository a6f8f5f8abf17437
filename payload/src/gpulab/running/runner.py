"""Running a graph: schedule, split into per-backend segments, move values between them."""

from __future__ import annotations

import os
import time
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from gpulab._closeable import Closeable
from gpulab._shown import shown
from gpulab.backends.base import (
    RUN_PHASES,
    FloatArray,
    OperationExecutor,
    Segment,
    SegmentRun,
)
from gpulab.backends.select import auto_fallback, open_executor, resolve
from gpulab.graph import (
    Graph,
    MemoryLimit,
    Node,
    available_memory,
    materialize,
    schedule,
)
from gpulab.ops import NumericalError
from gpulab.placement.device_choice import DeviceChoice, choose_device, read_slurm_allocation
from gpulab.results.result import NodeRecord, Result
from gpulab.running.inputs import plan_inputs

if TYPE_CHECKING:
    from gpulab.kernels import Pattern

COMPARE_RTOL = 1e-3
"""Largest error, relative to the largest magnitude of the other backend's output, that
--compare accepts."""


def split(graph: Graph, backend: str) -> list[tuple[str, Segment]]:
    """Scheduled nodes grouped into runs of one backend, each with what it reads and exports."""
    plan = schedule(graph)
    groups: list[tuple[str, list[Node]]] = []
    for node_id in plan.order:
        node = graph.nodes[node_id]
        where = node.backend or backend
        if groups and groups[-1][0] == where:
            groups[-1][1].append(node)
        else:
            groups.append((where, [node]))
    segments = []
    for i, (where, nodes) in enumerate(groups):
        inside = {node.id for node in nodes}
        reads = dict.fromkeys(
            name for node in nodes for name in node.references if name not in inside
        )
        later = {name for _, group in groups[i + 1 :] for node in group for name in node.references}
        exports = tuple(n.id for n in nodes if n.id in graph.output_set or n.id in later)
        releases = {node.id: plan.releases[node.id] for node in nodes}
        segments.append((where, Segment(graph, tuple(nodes), tuple(reads), exports, releases)))
    return segments


def max_relative_error(got: FloatArray, expected: FloatArray) -> float:
    """max |got - expected| over the largest |expected| (normwise: zeros do not blow it up)."""
    wide = expected.astype(np.float64)
    scale = max(float(np.max(np.abs(wide))) if wide.size else 0.0, 1e-30)
    difference = np.abs(got.astype(np.float64) - wide)
    if not np.all(np.isfinite(difference)):
        return float("inf")
    return float(np.max(difference)) / scale if difference.size else 0.0


class Runner(Closeable):
    """Runs graphs on one backend (with per-node overrides); keeps its executors open between
    runs, so an executor that records work reuses it when the same graph runs again.

    It names no backend: what differs between them is the executors' to say (the interface
    in backends.base) or the choice's (backends.select: which backend `auto` means, and where
    it falls back to)."""

    def __init__(
        self,
        backend: str = "auto",
        device: int | None = None,
        memory_budget: int | None = None,
        *,
        fuse: bool = True,
    ) -> None:
        self.requested = backend
        self.fuse = fuse
        """Whether executors that fuse run fusable chains as one shader (gpulab.graph.fusion)."""
        self.device_index = device
        """The --device asked for (None: the default, see device_choice)."""
        self.memory_budget = memory_budget
        """Caps every device memory heap at this many bytes (None: the heaps' sizes)."""
        self._choice: DeviceChoice | None = None
        self.backend, self.reason = resolve(
            backend, self.device_choice if backend == "auto" else None
        )
        self.fallback: dict[str, str] | None = None
        """Set when `auto` ran out of device memory and ran on its fallback instead: from, to,
        reason."""
        self._executors: dict[str, OperationExecutor] = {}
        self._closed = False

    @property
    def device_choice(self) -> DeviceChoice:
        """The device this runner uses and why (made when an executor first asks: a run on
        the host never looks for devices)."""
        if self._choice is None:
            self._choice = choose_device(self.device_index)
        return self._choice

    @property
    def device_warning(self) -> str | None:
        """Why the device asked for is questionable (outside the Slurm allocation), if it is."""
        return None if self._choice is None else self._choice.warning

    def memory_limit(self) -> MemoryLimit:
        """What a graph may hold at once to run here: the host memory available now (values
        are made on the host unless only a device reads them, and host backends run there).
        A graph that fits the host but not the device is valid: on the device that is an
        out-of-memory failure (exit 4), under `auto` a fall back to the host."""
        return available_memory()

    def executor(self, backend: str) -> OperationExecutor:
        """The open executor of a concrete backend (opened on first use)."""
        if self._closed:
            raise RuntimeError("this Runner is closed")
        if backend not in self._executors:
            self._executors[backend] = open_executor(
                backend,
                memory_budget=self.memory_budget,
                fuse=self.fuse,
                choice=lambda: self.device_choice,
            )
        return self._executors[backend]

    def run(self, graph: Graph, compare: str | None = None) -> Result:
        """Run `graph`; with `compare`, run it again on that backend and report the errors.

        Under `auto`, a graph that does not fit in the device's memory runs on auto's
        fallback instead (backends.select.auto_fallback): the executor that ran out is closed
        first (its memory released) and the result says so under `fallback`. A value that
        overflows or turns NaN is a NumericalError naming its node, without numpy warnings on
        stderr.
        """
        with np.errstate(all="ignore"):
            try:
                result = self._run(graph)
            except MemoryError as exc:
                fallback = auto_fallback(self.backend) if self.requested == "auto" else None
                if fallback is None:
                    raise
                self._fall_back(exc, fallback)
                result = self._run(graph)
            if compare is not None:
                result.comparison = self._compare(graph, result, compare)
        return result

    def _fall_back(self, error: MemoryError, fallback: str) -> None:
        failed = self._executors.pop(self.backend, None)
        if failed is not None:
            failed.close()
        self.fallback = {"from": self.backend, "to": fallback, "reason": str(error)}
        self.backend = fallback
        self.reason = f"{self.reason}; fell back to {fallback}: {error}"

    def _run(self, graph: Graph) -> Result:
        start = time.perf_counter()
        segments = split(graph, self.backend)
        for where, segment in segments:
            # Every backend is available, and every value fits its device, before any work.
            self.executor(where).check_fits(segment)
        phases = dict.fromkeys(RUN_PHASES, 0.0)
        phases["open_ms"] = (time.perf_counter() - start) * 1e3
        plan = plan_inputs(graph, segments, self._cannot_generate)
        ran: dict[str, OperationExecutor] = {}
        host: dict[str, FloatArray] = {}
        producer: dict[str, str] = {}
        records: list[NodeRecord] = []
        transfers: list[dict[str, str]] = []
        warnings = [str(w) for w in graph.warnings]
        dispatches: int | None = None
        fused: list[list[str]] = []
        for index, (where, segment) in enumerate(segments):
            # Only the segments of the executor that makes an input have it (plan_inputs).
            made = plan.made_by(segment)
            inputs_ms = self._materialize(graph, segment, made, host)
            for name in segment.reads:
                if name in producer and producer[name] != where:
                    transfers.append({"value": name, "from": producer[name], "to": where})
            ran[where] = self.executor(where)
            done = ran[where].execute(segment, host, made)
            for name, notes in done.made.items():
                plan.report[name].update(notes)
            if inputs_ms:
                done.phases["inputs_ms"] = done.phases.get("inputs_ms", 0.0) + inputs_ms
            for phase, ms in done.phases.items():
                phases[phase] += ms
            if done.dispatches is not None:
                dispatches = (dispatches or 0) + done.dispatches
            fused.extend(done.fused)
            warnings.extend(self._check_solvers(done))
            self._check_finite(segment, done)
            host.update(done.values)
            producer.update(dict.fromkeys(done.values, where))
            records.extend(self._records(where, segment, done))
            self._forget(host, graph, segments[index + 1 :])
        outputs = {name: self._output(name, graph, host) for name in graph.outputs}
        total_ms = (time.perf_counter() - start) * 1e3
        main = self.backend if self.backend in self._executors else segments[0][0]
        # The memory statistics and the fusion of the executors that have them (a device's).
        memory = next((m for e in ran.values() if (m := e.memory_stats()) is not None), None)
        fusion = next((f for e in ran.values() if (f := e.fusion) is not None), None)
        result = Result(
            graph=graph.name,
            backend=self.backend,
            requested_backend=self.requested,
            backend_reason=self.reason,
            device=self._device(main),
            outputs=outputs,
            nodes=records,
            total_ms=total_ms,
            transfers=transfers,
            memory=memory,
            warnings=warnings,
            fallback=self.fallback,
            inputs=plan.report,
            phases=phases,
            dispatches=dispatches,
            fused=fused if fusion is not None else None,
            fusion=fusion,
        )
        gpus = self._slurm_gpus()
        if result.slurm is not None and gpus is not None:
            result.slurm["gpus"] = gpus
        return result

    @staticmethod
    def _materialize(
        graph: Graph, segment: Segment, made: Container[str], host: dict[str, FloatArray]
    ) -> float:
        """Make on the host the inputs `segment` reads that are neither there yet nor made
        by its executor; the milliseconds it took."""
        start = time.perf_counter()
        for name in segment.reads:
            if name in graph.inputs and name not in host and name not in made:
                host[name] = materialize(graph.inputs[name])
        return (time.perf_counter() - start) * 1e3

    def _cannot_generate(self, backend: str, pattern: Pattern, count: int) -> str | None:
        # Asked only about inputs that segments of `backend` read: its executor is open.
        return self.executor(backend).cannot_generate(pattern, count)

    def _device(self, backend: str) -> dict[str, Any]:
        """The device of the backend's executor (with what chose it, for a device chosen by
        device_choice: the executor says so)."""
        return self.executor(backend).device

    def _slurm_gpus(self) -> dict[str, Any] | None:
        """The GPUs Slurm gave the job; with the device each maps to once known."""
        if self._choice is not None:
            return self._choice.slurm_json()
        allocation = read_slurm_allocation(os.environ)
        return None if allocation is None else allocation.to_json()

    @staticmethod
    def _output(name: str, graph: Graph, host: Mapping[str, FloatArray]) -> FloatArray:
        if name in host:
            return host[name]
        return materialize(graph.inputs[name])

    @staticmethod
    def _check_finite(segment: Segment, done: SegmentRun) -> None:
        """A NaN or infinity in a value the segment hands on is a NumericalError naming the
        node (exit 4), as a zero-vector normalize is: a null in the result would pass for one."""
        for node in segment.nodes:
            value = done.values.get(node.id)
            if value is None:
                continue
            finite = np.isfinite(value)
            if not finite.all():
                raise NumericalError(
                    f"node {shown(node.id)} ({node.op}): {value.size - int(finite.sum())} of "
                    f"{value.size} values are not finite (an overflow, or a singular or "
                    "diverging system)"
                )

    @staticmethod
    def _check_solvers(done: SegmentRun) -> list[str]:
        """A jacobi whose update is not finite is a NumericalError (exit 4); one that stopped
        at its iteration limit short of its tolerance is a warning (returned)."""
        for node_id, report in done.solvers.items():
            failure = report.failure(node_id)
            if failure is not None:
                raise NumericalError(failure)
        notes = (report.warning(node_id) for node_id, report in done.solvers.items())
        return [note for note in notes if note is not None]

    @staticmethod
    def _records(where: str, segment: Segment, done: SegmentRun) -> list[NodeRecord]:
        return [
            NodeRecord(
                node.id,
                node.op,
                where,
                done.times_ms.get(node.id, 0.0),
                done.timer,
                done.solvers.get(node.id),
            )
            for node in segment.nodes
        ]

    @staticmethod
    def _forget(host: dict[str, FloatArray], graph: Graph, rest: list[tuple[str, Segment]]) -> None:
        """Drop host values that no later segment reads and that are not outputs."""
        needed = {name for _, segment in rest for name in segment.reads}
        for name in list(host):
            if name not in needed and name not in graph.output_set:
                del host[name]

    def _compare(self, graph: Graph, result: Result, backend: str) -> dict[str, object]:
        with Runner(backend, self.device_index, self.memory_budget) as other:
            expected = other.run(graph).outputs
        errors = {
            name: max_relative_error(value, expected[name])
            for name, value in result.outputs.items()
        }
        return {
            "backend": backend,
            "rtol": COMPARE_RTOL,
            "ok": all(error <= COMPARE_RTOL for error in errors.values()),
            "max_rel_err": errors,
        }

    def close(self) -> None:
        """Close every executor this runner opened; a second call does nothing."""
        self._closed = True
        executors, self._executors = self._executors, {}
        for executor in executors.values():
            executor.close()


def run_graph(
    graph: Graph,
    backend: str = "auto",
    device: int | None = None,
    compare: str | None = None,
    memory_budget: int | None = None,
    *,
    fuse: bool = True,
) -> Result:
    """Run `graph` once on `backend` (a Runner kept open for one run)."""
    with Runner(backend, device, memory_budget, fuse=fuse) as runner:
        return runner.run(graph, compare)
