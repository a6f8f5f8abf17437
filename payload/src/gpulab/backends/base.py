"""The one interface every backend implements: run a segment of a scheduled graph.

A segment is a run of consecutive scheduled nodes that share a backend. The executor gets the
values the segment reads from outside (host float32 arrays; scalars are 0-d arrays), runs every
node in order, releases each value after its last reader inside the segment, and returns only
the values needed after it (graph outputs, or reads by a later segment on another backend).
Executors may keep per-segment work (a recorded command buffer) under `Segment.key`.
"""

from __future__ import annotations

import abc
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.backends.errors import BackendUnavailable, ExecutionFailed
from gpulab.graph import Graph, Node
from gpulab.ops.solver import SolverReport

# The errors are re-exported: an executor imports its whole interface from here.
__all__ = [
    "RUN_PHASES",
    "BackendUnavailable",
    "ExecutionFailed",
    "FloatArray",
    "OperationExecutor",
    "Segment",
    "SegmentRun",
]

FloatArray = npt.NDArray[np.float32]
RUN_PHASES = ("open_ms", "inputs_ms", "upload_ms", "record_ms", "gpu_ms", "readback_ms")
"""Where a run's time goes, in order: executors opened (instance, device; once per Runner),
inputs made, uploaded, commands recorded, the device's own time (GPU timestamps where it has
them), results read back. Disjoint, so their sum is at most the run's total."""


@dataclass(frozen=True)
class Segment:
    """Consecutive scheduled nodes on one backend, and what flows in and out of them."""

    graph: Graph
    nodes: tuple[Node, ...]
    reads: tuple[str, ...]
    exports: tuple[str, ...]
    releases: Mapping[str, tuple[str, ...]]

    @property
    def key(self) -> str:
        """A fingerprint of the work: same ops, shapes, params and flow give the same key."""
        description = {
            "nodes": [
                [n.id, n.op, sorted((k, repr(v)) for k, v in n.inputs.items()), dict(n.params)]
                for n in self.nodes
            ],
            "shapes": {name: self.graph.shape(name) for name in self.reads},
            "exports": self.exports,
        }
        text = json.dumps(description, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class SegmentRun:
    """What a segment produced: the exported values, each node's time, and where the
    segment's time went (`phases`: milliseconds under the keys of RUN_PHASES that apply)."""

    values: dict[str, FloatArray]
    times_ms: dict[str, float]
    timer: str = "host"
    details: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    """Milliseconds by phase (RUN_PHASES): inputs_ms, upload_ms, record_ms, gpu_ms, readback_ms."""
    solvers: dict[str, SolverReport] = field(default_factory=dict)
    """How each jacobi node's solve went, by node id."""


class OperationExecutor(abc.ABC):
    """A backend: executes segments; `device` describes where (contract keys name/type/driver)."""

    name: str

    @property
    @abc.abstractmethod
    def device(self) -> dict[str, Any]:
        """The device summary for the result JSON."""

    @abc.abstractmethod
    def execute(self, segment: Segment, values: Mapping[str, FloatArray]) -> SegmentRun:
        """Run every node of `segment` on `values` (at least `segment.reads`)."""

    def memory_stats(self) -> dict[str, Any] | None:
        """Pool and allocator statistics, for backends that manage device memory."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the executor holds; a second call does nothing."""

    def __enter__(self) -> OperationExecutor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
