"""gpulab: a small Vulkan compute framework, and the payload of the gpulab cluster."""

__version__ = "0.1.0"
