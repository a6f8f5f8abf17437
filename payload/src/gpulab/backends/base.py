"""The one interface every backend implements: run a segment of a scheduled graph.

A segment is a run of consecutive scheduled nodes that share a backend. The executor gets the
values the segment reads from outside (host float32 arrays; scalars are 0-d arrays), runs every
node in order, releases each value after its last reader inside the segment, and returns only
the values needed after it (graph outputs, or reads by a later segment on another backend).
Executors may keep per-segment work (a recorded command buffer) under `Segment.key`, and may
make some inputs themselves (see `cannot_generate` and running/inputs.py).
"""

from __future__ import annotations

import abc
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpulab._closeable import Closeable
from gpulab.graph import Graph, Node
from gpulab.ops.solver import SolverReport

if TYPE_CHECKING:
    from gpulab.graph.model import NpyFile
    from gpulab.kernels import Pattern

    MadeInput = Pattern | NpyFile
    """An input an executor makes itself: a pattern it generates, or a .npy file it reads."""
    Made = Mapping[str, MadeInput] | None
    """The inputs of a segment its executor makes itself, by name."""

FloatArray = npt.NDArray[np.float32]
Values = Mapping[str, FloatArray]
"""Host values by name."""
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
    phases: dict[str, float] = field(default_factory=dict)
    """Milliseconds by phase (RUN_PHASES): inputs_ms, upload_ms, record_ms, gpu_ms, readback_ms."""
    solvers: dict[str, SolverReport] = field(default_factory=dict)
    """How each jacobi node's solve went, by node id."""
    dispatches: int | None = None
    """The compute dispatches the nodes recorded (a device backend's), after fusion."""
    fused: list[list[str]] = field(default_factory=list)
    """The node ids of each group that ran as one shader (gpulab.graph.fusion)."""
    made: dict[str, dict[str, str]] = field(default_factory=dict)
    """For inputs the executor made itself: keys added to their entry of the result's
    `inputs` (how a .npy file was read: `read` "streamed" or "pinned", `not_streamed`)."""


class OperationExecutor(Closeable):
    """A backend: executes segments; `device` describes where (contract keys name/type/driver).

    The runner asks executors, never which backend they are: their device (with `chosen_by`
    where the runner's device choice picked it), whether a value fits (`check_fits`), which
    inputs they make themselves (`cannot_generate`), their memory statistics and fusion."""

    name: str

    @property
    @abc.abstractmethod
    def device(self) -> dict[str, Any]:
        """The device summary for the result JSON (with `chosen_by` when a device choice
        picked the device: backends.select.open_executor's `choice`)."""

    @abc.abstractmethod
    def execute(self, segment: Segment, values: Values, made: Made = None) -> SegmentRun:
        """Run every node of `segment` on `values` (at least the reads not in `made`); the
        inputs in `made` the executor makes itself (only those cannot_generate allowed)."""

    def cannot_generate(self, pattern: Pattern, count: int) -> str | None:
        """Why this executor cannot make `count` values of `pattern` itself, bit for bit as
        the host makes them (None: it can)."""
        return f"the {self.name} executor generates no inputs"

    def check_fits(self, segment: Segment) -> None:
        """Raise OutOfMemoryError, before any work, when a value of `segment` cannot fit."""

    def memory_stats(self) -> dict[str, Any] | None:
        """Pool and allocator statistics, for backends that manage device memory."""
        return None

    @property
    def fusion(self) -> str | None:
        """Whether this backend fuses nodes ("on", or "off" and why), None where it never does."""
        return None
