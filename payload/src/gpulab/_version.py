"""The package version, in one place (the Vulkan layer reports it as the engine version)."""

__version__ = "0.1.0"
