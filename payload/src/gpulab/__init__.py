"""gpulab: a small Vulkan compute framework, and the payload of the gpulab cluster."""

from gpulab._version import __version__
from gpulab.backends import Result, Runner, run_graph
from gpulab.compute import GpuComputePipeline
from gpulab.graph import Graph, GraphInvalid, load_graph

__all__ = [
    "GpuComputePipeline",
    "Graph",
    "GraphInvalid",
    "Result",
    "Runner",
    "__version__",
    "load_graph",
    "run_graph",
]
