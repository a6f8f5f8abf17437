"""The result of a run, and its JSON (the contract's result version 1)."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from gpulab._version import __version__
from gpulab.backends.base import RUN_PHASES, FloatArray
from gpulab.ops.solver import SolverReport
from gpulab.results.result_file import DATA_LIMIT

RESULT_VERSION = 1
TIMING_PHASES = ("load_ms", *RUN_PHASES, "write_ms")
"""The keys of `timing` besides total_ms, in the order the work happens."""


def _finite(value: float) -> float | None:
    # JSON has no NaN or infinity; null says "not a number" without breaking parsers.
    return value if math.isfinite(value) else None


def _data(array: FloatArray) -> Any:
    if np.all(np.isfinite(array)):
        return array.tolist()
    return _nulls(array.tolist())


def _nulls(values: Any) -> Any:
    if isinstance(values, list):
        return [_nulls(value) for value in values]
    return _finite(values)


def output_json(value: FloatArray, full: bool) -> dict[str, Any]:
    """One output: a scalar's value, or shape, summary and (small or `full`) data."""
    if value.ndim == 0:
        return {"type": "scalar", "value": _finite(float(value))}
    wide = value.astype(np.float64)
    entry: dict[str, Any] = {
        "type": "vector" if value.ndim == 1 else "matrix",
        "shape": list(value.shape),
        "summary": {
            "sum": _finite(float(wide.sum())),
            "min": _finite(float(wide.min())),
            "max": _finite(float(wide.max())),
            "l2": _finite(float(np.sqrt(np.dot(wide.ravel(), wide.ravel())))),
        },
    }
    if value.size <= DATA_LIMIT or full:
        entry["data"] = _data(value)
    return entry


class _OutputsAsWritten(dict[str, Any]):
    """The outputs' JSON made one output at a time as json.dump reaches it (it asks for
    items()): the data lists of all outputs are never in memory together, nor the text."""

    def __init__(self, outputs: dict[str, FloatArray], full: bool) -> None:
        super().__init__(outputs)
        self._full = full

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        return ((name, output_json(value, self._full)) for name, value in super().items())


class _TimingAsWritten(dict[str, float]):
    """`timing` whose write_ms is read when the encoder reaches it (it asks for items())."""

    def __init__(self, result: Result, started: float) -> None:
        super().__init__(result.timing())
        self._result = result
        self._started = started

    def items(self) -> Iterator[tuple[str, float]]:  # type: ignore[override]
        write_ms = (time.perf_counter() - self._started) * 1e3
        return iter(self._result.timing(write_ms).items())


def slurm_info() -> dict[str, Any] | None:
    """The Slurm job id and node list when running inside a Slurm job."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        return None
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST", "")
    return {"job_id": job_id, "nodelist": nodelist}


@dataclass(frozen=True)
class NodeRecord:
    """How one node ran: where, and for how long (GPU timestamps or host clock)."""

    id: str
    op: str
    backend: str
    time_ms: float
    timer: str
    solver: SolverReport | None = None
    """jacobi: steps run, convergence, last update (the entry's `solver`)."""

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": self.id,
            "op": self.op,
            "backend": self.backend,
            "time_ms": self.time_ms,
            "timer": self.timer,
        }
        if self.solver is not None:
            entry["solver"] = self.solver.to_json()
        return entry


@dataclass
class Result:
    """Outputs as float32 numpy arrays (scalars 0-d) and how the run went."""

    graph: str
    backend: str
    requested_backend: str
    backend_reason: str
    device: dict[str, Any]
    outputs: dict[str, FloatArray]
    nodes: list[NodeRecord]
    total_ms: float
    transfers: list[dict[str, str]] = field(default_factory=list)
    memory: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    comparison: dict[str, Any] | None = None
    fallback: dict[str, str] | None = None
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)
    """Where each input was made: source, made_on (device or host), and the reason when
    one the device could have made was made on the host (running/inputs.py)."""
    host: str = field(default_factory=lambda: os.uname().nodename)
    """The host's name (gethostname's, without importing socket for it)."""
    slurm: dict[str, Any] | None = field(default_factory=slurm_info)
    phases: dict[str, float] = field(default_factory=dict)
    """Milliseconds by TIMING_PHASES key: the runner's RUN_PHASES, and `load_ms` (reading and
    validating the graph) when the caller measured it; `write_ms` is measured as written."""
    dispatches: int | None = None
    """The compute dispatches the Vulkan backend's nodes ran, after fusion (timing.dispatches)."""
    fused: list[list[str]] | None = None
    """The node ids of each group that ran as one shader, when the Vulkan backend ran."""
    fusion: str | None = None
    """"on", or "off" and why, when the Vulkan backend ran."""

    def to_json(self, full: bool = False) -> dict[str, Any]:
        """The contract's result JSON; output data beyond 65536 elements only when `full`."""
        outputs = {name: output_json(v, full) for name, v in self.outputs.items()}
        return self._document(outputs, self.timing())

    def write_json(self, stream: TextIO, full: bool = False) -> None:
        """to_json() written to `stream` as indented JSON, streamed: a result of hundreds of
        MiB takes about its largest output in memory, not several times the whole text.
        `timing.write_ms` is the time from here until the encoder reaches `timing`, the
        document's last key (everything but the file's final flush)."""
        timing = _TimingAsWritten(self, time.perf_counter())
        json.dump(self._document(_OutputsAsWritten(self.outputs, full), timing), stream, indent=2)
        stream.write("\n")

    def timing(self, write_ms: float | None = None) -> dict[str, float]:
        """The result's `timing`: total_ms and every TIMING_PHASES key (0.0 where unmeasured),
        and `dispatches` when the Vulkan backend ran."""
        phases = self.phases if write_ms is None else self.phases | {"write_ms": write_ms}
        timing = {"total_ms": self.total_ms} | {key: phases.get(key, 0.0) for key in TIMING_PHASES}
        if self.dispatches is not None:
            timing["dispatches"] = self.dispatches
        return timing

    def _document(self, outputs: dict[str, Any], timing: dict[str, Any]) -> dict[str, Any]:
        document: dict[str, Any] = {
            "version": RESULT_VERSION,
            "graph": self.graph,
            "backend": self.backend,
            "backend_requested": self.requested_backend,
            "backend_reason": self.backend_reason,
            "device": self.device,
            "outputs": outputs,
            "nodes": [node.to_json() for node in self.nodes],
            "transfers": self.transfers,
            "inputs": self.inputs,
            "host": self.host,
            "gpulab_version": __version__,
            "warnings": self.warnings,
        }
        if self.slurm is not None:
            document["slurm"] = self.slurm
        if self.memory is not None:
            document["memory"] = self.memory
        if self.comparison is not None:
            document["compare"] = self.comparison
        if self.fallback is not None:
            document["fallback"] = self.fallback
        if self.fusion is not None:
            document["fusion"] = self.fusion
            document["fused"] = self.fused or []
        document["timing"] = timing  # last: write_json measures the writing up to here
        return document
