"""The executors that run a scheduled graph's segments (`cpu`, `native`, `vulkan`) behind one
OperationExecutor interface, the choice of executor by backend name, and the backends' errors.

Running a whole graph is gpulab.running's, its result gpulab.results', which device a run uses
gpulab.placement's. Names are imported on first use (PEP 562): the CLI reads BACKENDS and the
errors without loading numpy, Vulkan or the kernels.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes

if TYPE_CHECKING:
    from gpulab.backends.base import OperationExecutor, Segment, SegmentRun
    from gpulab.backends.errors import BackendUnavailable, ExecutionFailed
    from gpulab.backends.names import BACKENDS
    from gpulab.backends.select import open_executor, resolve

__all__ = [
    "BACKENDS",
    "BackendUnavailable",
    "ExecutionFailed",
    "OperationExecutor",
    "Segment",
    "SegmentRun",
    "open_executor",
    "resolve",
]

_MODULES = {
    "base": ("OperationExecutor", "Segment", "SegmentRun"),
    "errors": ("BackendUnavailable", "ExecutionFailed"),
    "names": ("BACKENDS",),
    "select": ("open_executor", "resolve"),
}
__getattr__, __dir__ = lazy_attributes(
    __name__, {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}
)
