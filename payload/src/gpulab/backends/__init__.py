"""Backends that execute graphs (`cpu`, `native`, `vulkan`) behind one OperationExecutor
interface, the Runner that schedules a graph over them, and the result of a run."""

from gpulab.backends.base import (
    BackendUnavailable,
    ExecutionFailed,
    OperationExecutor,
    Segment,
    SegmentRun,
)
from gpulab.backends.device_choice import DeviceChoice, choose_device
from gpulab.backends.gpu_files import HostFiles, files_by_device
from gpulab.backends.result import Result
from gpulab.backends.result_file import (
    OutputFailed,
    OutputRefused,
    OutputTarget,
    output_target,
    prepare_output,
    write_result,
)
from gpulab.backends.runner import Runner, run_graph
from gpulab.backends.select import BACKENDS, open_executor, resolve

__all__ = [
    "BACKENDS",
    "BackendUnavailable",
    "DeviceChoice",
    "ExecutionFailed",
    "HostFiles",
    "OperationExecutor",
    "OutputFailed",
    "OutputRefused",
    "OutputTarget",
    "Result",
    "Runner",
    "Segment",
    "SegmentRun",
    "choose_device",
    "files_by_device",
    "open_executor",
    "output_target",
    "prepare_output",
    "resolve",
    "run_graph",
    "write_result",
]
