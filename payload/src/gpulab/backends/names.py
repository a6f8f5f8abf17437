"""The backend names every parser offers: the graph format's names, and `auto`."""

from __future__ import annotations

from gpulab.graph.model import BACKEND_NAMES

BACKENDS = ("auto", *BACKEND_NAMES)
"""What `--backend` accepts; `auto` is Vulkan when a device exists, else cpu."""

__all__ = ["BACKENDS", "BACKEND_NAMES"]
