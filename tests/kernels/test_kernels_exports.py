"""gpulab.kernels' public names: the recording API the graph backends build on."""

from __future__ import annotations

import gpulab.kernels


def test_public_names_are_pinned() -> None:
    assert sorted(gpulab.kernels.__all__) == sorted(
        [
            "EXTRA_OPS",
            "NO_ELEMENT",
            "REDUCTIONS",
            "Constant",
            "DeviceArray",
            "DeviceSession",
            "Extra",
            "Geometry",
            "Input",
            "Kernels",
            "OwnedArray",
            "Pattern",
            "Ramp",
            "Recorded",
            "Scratch",
            "Uniform",
        ]
    )
    for name in gpulab.kernels.__all__:
        assert getattr(gpulab.kernels, name) is not None
