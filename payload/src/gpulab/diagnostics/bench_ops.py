"""What `gpulab bench` measures per op: the shapes a size stands for and the bytes moved.

Vector ops take `n` elements; matvec, matmul and jacobi take `n` as the side of an n x n
matrix, or matmul an m x k by k x n product (`dims`, from `--shapes MxKxN`). Effective
bandwidth counts each array read or written once (what the op must move); the matrix ops also
report GFLOP/s (the number that matters for matmul), jacobi its time per sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    shapes: tuple[tuple[int, int, int], ...] = ()
    """matmul also at these (m, k, n) products."""


@dataclass(frozen=True)
class Workload:
    """One op at one size: its input shapes, bytes moved and floating-point operations."""

    op: str
    n: int
    dims: tuple[int, int, int] | None = None
    """matmul's (m, k, n) when not n x n x n."""

    @property
    def matrix(self) -> bool:
        """Whether `n` is a matrix side."""
        return self.op in MATRIX_OPS

    @property
    def product(self) -> tuple[int, int, int]:
        """matmul's (m, k, n)."""
        return self.dims or (self.n, self.n, self.n)

    @property
    def label(self) -> str:
        """The size as the table prints it: n, or MxKxN."""
        return "x".join(map(str, self.dims)) if self.dims else str(self.n)

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus written, each array once."""
        n = self.n
        if self.op == "matvec":
            return 4 * (n * n + 2 * n)
        if self.op == "matmul":
            m, k, cols = self.product
            return 4 * (m * k + k * cols + m * cols)
        if self.op == "jacobi":
            return 4 * JACOBI_STEPS * (n * n + 3 * n)
        return 4 * _VECTOR_TRAFFIC[self.op] * n

    @property
    def flops(self) -> int:
        """Floating-point operations (multiply-adds count two)."""
        n = self.n
        if self.op == "matmul":
            m, k, cols = self.product
            return 2 * m * k * cols
        if self.op == "matvec":
            return 2 * n * n
        if self.op == "jacobi":
            return JACOBI_STEPS * 2 * n * n
        return n

    @property
    def device_bytes(self) -> int:
        """Bytes of device memory the inputs and output take (for the size limit)."""
        n = self.n
        if self.op == "matmul":
            return self.bytes_moved
        return 4 * (3 * n * n + 2 * n) if self.matrix else 4 * 3 * n


def matrix_fields(workload: Workload, seconds: float) -> dict[str, Any]:
    """What a matrix op's row adds to GB/s (Vulkan's and the compared library's alike):
    GFLOP/s and the shape; jacobi its sweeps and the time of one."""
    fields: dict[str, Any] = {"gflops": workload.flops / seconds / 1e9}
    if workload.op == "matmul":
        fields["shape"] = list(workload.product)
    else:
        fields["shape"] = [workload.n, workload.n]
    if workload.op == "jacobi":
        fields["sweeps"] = JACOBI_STEPS
        fields["sweep_ms"] = seconds * 1e3 / JACOBI_STEPS
    return fields


def parse_shape(text: str) -> tuple[int, int, int]:
    """MxKxN (positive integers) as `--shapes` takes it."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(f"expected MxKxN (for example 4097x33x4095), got {text!r}")
    m, k, n = (int(part) for part in parts)
    return m, k, n


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
