"""Backends that execute graphs (`cpu`, `native`, `vulkan`) behind one OperationExecutor
interface, the Runner that schedules a graph over them, and the result of a run.

Names are imported on first use (PEP 562): the CLI reads BACKENDS and the errors without
loading numpy, Vulkan or the kernels.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes

if TYPE_CHECKING:
    from gpulab.backends.base import OperationExecutor, Segment, SegmentRun
    from gpulab.backends.device_choice import DeviceChoice, choose_device
    from gpulab.backends.errors import BackendUnavailable, ExecutionFailed
    from gpulab.backends.gpu_files import HostFiles, files_by_device
    from gpulab.backends.names import BACKENDS
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
    from gpulab.backends.select import open_executor, resolve

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

_MODULES = {
    "base": ("OperationExecutor", "Segment", "SegmentRun"),
    "device_choice": ("DeviceChoice", "choose_device"),
    "errors": ("BackendUnavailable", "ExecutionFailed"),
    "gpu_files": ("HostFiles", "files_by_device"),
    "names": ("BACKENDS",),
    "result": ("Result",),
    "result_file": (
        "OutputFailed",
        "OutputRefused",
        "OutputTarget",
        "output_target",
        "prepare_output",
        "write_result",
    ),
    "runner": ("Runner", "run_graph"),
    "select": ("open_executor", "resolve"),
}
__getattr__, __dir__ = lazy_attributes(
    __name__, {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}
)
