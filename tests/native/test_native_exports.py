"""The public names of gpulab.native and of its kernels module are pinned."""

from __future__ import annotations

import gpulab.native
from gpulab.native import kernels

OPS = [
    "add",
    "scale",
    "saxpy",
    "sum",
    "min",
    "max",
    "dot",
    "l2_norm",
    "normalize",
    "matvec",
    "matmul",
    "jacobi",
    "jacobi_step",
]


def test_package_exports() -> None:
    assert sorted(gpulab.native.__all__) == sorted(
        [
            "LIB_DIR_ENV",
            "HostOutOfMemory",
            "InvalidArgument",
            "NativeUnavailable",
            "OutOfSpace",
            "Suballocator",
            "SuballocatorClosed",
            "SuballocatorError",
            "SuballocatorStats",
            "UnknownOffset",
            "kernels",
        ]
    )
    for name in gpulab.native.__all__:
        assert hasattr(gpulab.native, name)


def test_kernels_offer_every_contract_op() -> None:
    for op in OPS:
        assert callable(getattr(kernels, op)), op
