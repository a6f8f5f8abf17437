"""gpulab: a small Vulkan compute framework, and the payload of the gpulab cluster.

The public names are imported on first use (PEP 562), so `import gpulab` stays light.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes
from gpulab._version import __version__

if TYPE_CHECKING:
    from gpulab.compute import GpuComputePipeline
    from gpulab.graph import Graph, GraphInvalid, load_graph
    from gpulab.kernels.user import Kernel, kernel
    from gpulab.results import Result
    from gpulab.running import Runner, run_graph

__all__ = [
    "GpuComputePipeline",
    "Graph",
    "GraphInvalid",
    "Kernel",
    "Result",
    "Runner",
    "__version__",
    "kernel",
    "load_graph",
    "run_graph",
]

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "GpuComputePipeline": "gpulab.compute",
        "Graph": "gpulab.graph",
        "GraphInvalid": "gpulab.graph",
        "Kernel": "gpulab.kernels.user",
        "kernel": "gpulab.kernels.user",
        "Result": "gpulab.results",
        "Runner": "gpulab.running",
        "load_graph": "gpulab.graph",
        "run_graph": "gpulab.running",
    },
)
