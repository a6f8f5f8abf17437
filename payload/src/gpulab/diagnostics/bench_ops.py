"""What `gpulab bench` measures per op: the shapes a size stands for and the bytes moved.

Vector ops take `n` elements; matvec, matmul and jacobi take `n` as the side of an n x n
matrix. Effective bandwidth counts each array read or written once (what the op must move);
matmul also reports GFLOP/s, the number that matters for it.
"""

from __future__ import annotations

from dataclasses import dataclass

VECTOR_OPS = ("copy", "add", "scale", "saxpy", "sum", "min", "max", "dot", "l2_norm", "normalize")
MATRIX_OPS = ("matvec", "matmul", "jacobi")
ALL_OPS = VECTOR_OPS + MATRIX_OPS
DEFAULT_OPS = tuple(op for op in ALL_OPS if op != "copy")
JACOBI_STEPS = 10
"""jacobi's bench runs this many steps per op (one submission)."""

_VECTOR_TRAFFIC = {
    "copy": 2,
    "add": 3,
    "scale": 2,
    "saxpy": 3,
    "sum": 1,
    "min": 1,
    "max": 1,
    "dot": 2,
    "l2_norm": 1,
    "normalize": 3,  # x read for the norm, read again and written scaled
}


@dataclass(frozen=True)
class BenchOptions:
    """What a `gpulab bench` run measures, and where."""

    ops: list[str]
    sizes: list[int] | None
    """Elements (vector ops) or matrix sides; None: default_sizes."""
    device: int | None
    """The Vulkan device (None: the one choose_device picks)."""
    compare: str | None = None
    """torch or cupy: run the ops there too."""
    overhead: bool = True
    """Whether to add the dispatch overhead rows."""


@dataclass(frozen=True)
class Workload:
    """One op at one size: its input shapes, bytes moved and floating-point operations."""

    op: str
    n: int

    @property
    def matrix(self) -> bool:
        """Whether `n` is a matrix side."""
        return self.op in MATRIX_OPS

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus written, each array once."""
        n = self.n
        if self.op == "matvec":
            return 4 * (n * n + 2 * n)
        if self.op == "matmul":
            return 4 * 3 * n * n
        if self.op == "jacobi":
            return 4 * JACOBI_STEPS * (n * n + 3 * n)
        return 4 * _VECTOR_TRAFFIC[self.op] * n

    @property
    def flops(self) -> int:
        """Floating-point operations (multiply-adds count two)."""
        n = self.n
        if self.op == "matmul":
            return 2 * n * n * n
        if self.op == "matvec":
            return 2 * n * n
        if self.op == "jacobi":
            return JACOBI_STEPS * 2 * n * n
        return n

    @property
    def device_bytes(self) -> int:
        """Bytes of device memory the inputs and output take (for the size limit)."""
        n = self.n
        return 4 * (3 * n * n + 2 * n) if self.matrix else 4 * 3 * n


def default_sizes(op: str, device_local_bytes: int) -> list[int]:
    """Powers of four from 2^10 (vectors) or 2^8 (matrix sides) up to what fits in a quarter
    of the device-local memory, at most 2^28 elements (2^12 sides for matmul, 2^13 else)."""
    matrix = op in MATRIX_OPS
    first, last = (8, 12 if op == "matmul" else 13) if matrix else (10, 28)
    sizes = []
    for exponent in range(first, last + 1, 1 if matrix else 2):
        size = 1 << exponent
        if Workload(op, size).device_bytes * 4 > device_local_bytes:
            break
        sizes.append(size)
    return sizes
