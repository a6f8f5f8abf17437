"""gpulab: a small Vulkan compute framework, and the payload of the gpulab cluster."""

from gpulab._version import __version__
from gpulab.compute import GpuComputePipeline

__all__ = ["GpuComputePipeline", "__version__"]
