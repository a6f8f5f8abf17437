"""Backends that execute graphs (`cpu`, `native`, `vulkan`) behind one OperationExecutor
interface, the Runner that schedules a graph over them, and the result of a run."""

from gpulab.backends.base import (
    BackendUnavailable,
    ExecutionFailed,
    OperationExecutor,
    Segment,
    SegmentRun,
)
from gpulab.backends.result import Result
from gpulab.backends.runner import Runner, run_graph
from gpulab.backends.select import BACKENDS, open_executor, resolve

__all__ = [
    "BACKENDS",
    "BackendUnavailable",
    "ExecutionFailed",
    "OperationExecutor",
    "Result",
    "Runner",
    "Segment",
    "SegmentRun",
    "open_executor",
    "resolve",
    "run_graph",
]
