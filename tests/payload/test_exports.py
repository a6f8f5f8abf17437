"""The public names are pinned: adding or removing one is a deliberate change."""

from __future__ import annotations

import gpulab
import gpulab.vk


def test_gpulab_exports() -> None:
    assert gpulab.__all__ == [
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


def test_vk_exports_resolve() -> None:
    for name in gpulab.vk.__all__:
        assert hasattr(gpulab.vk, name), name
    assert sorted(gpulab.vk.__all__) == gpulab.vk.__all__
