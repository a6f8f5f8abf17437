"""What `gpulab bench` measures per op: the shapes a size stands for and the bytes moved.

Vector ops take `n` elements; matvec, matmul and jacobi take `n` as the side of an n x n
matrix, or matmul an m x k by k x n product (`dims`, from `--shapes MxKxN`). Effective
bandwidth counts each array read or written once (what the op must move); the matrix ops also
report GFLOP/s (the number that matters for matmul), jacobi its time per sweep.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpulab.ops.entries.jacobi import BENCH_STEPS
from gpulab.ops.entry import Bench
from gpulab.ops.registry import BUILT_IN, ENTRIES, entry, find

COPY = Bench(
    bytes_moved=lambda n, dims: 4 * 2 * n,
    flops=lambda n, dims: n,
    inputs=lambda n, dims: {"x": ((n,), 0.5)},
    compare=lambda xp, torch, v: (
        (lambda: v["out"].copy_(v["x"])) if torch else (lambda: xp.copyto(v["out"], v["x"]))
    ),
)
"""copy (a kernels op beyond the contract, x -> out): bench's bandwidth ceiling."""
BENCHES: Mapping[str, Bench] = {
    "copy": COPY,
    **{name: ENTRIES[name].bench for name in BUILT_IN if not ENTRIES[name].bench.matrix},
    **{name: ENTRIES[name].bench for name in BUILT_IN if ENTRIES[name].bench.matrix},
}
"""What bench measures of each op (the entries' `bench`), vector ops first."""


def bench_of(op: str) -> Bench:
    """What bench needs of `op` (an op another package adds included)."""
    return BENCHES.get(op) or entry(op).bench


VECTOR_OPS = tuple(op for op, bench in BENCHES.items() if not bench.matrix)
MATRIX_OPS = tuple(op for op, bench in BENCHES.items() if bench.matrix)
ALL_OPS = VECTOR_OPS + MATRIX_OPS
DEFAULT_OPS = tuple(op for op in ALL_OPS if op != "copy")


class OpChoices:
    """bench's `--ops` choices: the built-in ops when listed (help, completion, argparse's
    message), and also an op another package adds when asked (loaded then)."""

    def __iter__(self) -> Iterator[str]:
        return iter(ALL_OPS)

    def __len__(self) -> int:
        return len(ALL_OPS)

    def __contains__(self, op: object) -> bool:
        return op in BENCHES or (isinstance(op, str) and find(op) is not None)


OP_CHOICES = OpChoices()
JACOBI_STEPS = BENCH_STEPS


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
    def bench(self) -> Bench:
        """What the op's entry says bench needs of it."""
        return bench_of(self.op)

    @property
    def matrix(self) -> bool:
        """Whether `n` is a matrix side."""
        return self.bench.matrix

    @property
    def product(self) -> tuple[int, int, int]:
        """matmul's (m, k, n); (n, n, n) for the other ops."""
        return self.dims or (self.n, self.n, self.n)

    @property
    def label(self) -> str:
        """The size as the table prints it: n, or MxKxN."""
        return "x".join(map(str, self.dims)) if self.dims else str(self.n)

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus written, each array once."""
        return self.bench.bytes_moved(self.n, self.product)

    @property
    def flops(self) -> int:
        """Floating-point operations (multiply-adds count two)."""
        return self.bench.flops(self.n, self.product)

    @property
    def device_bytes(self) -> int:
        """Bytes of device memory the inputs and output take (for the size limit)."""
        n = self.n
        if self.bench.device_bytes is not None:
            return self.bench.device_bytes(n, self.product)
        return 4 * (3 * n * n + 2 * n) if self.matrix else 4 * 3 * n

    @property
    def inputs(self) -> dict[str, tuple[tuple[int, ...], float] | float]:
        """Each input: (shape, fill value) of an array, or a scalar literal."""
        return self.bench.inputs(self.n, self.product)

    @property
    def out_shape(self) -> tuple[int, ...]:
        """The shape of the result (() for a scalar)."""
        if find(self.op) is None:
            return (self.n,)  # copy
        spec = entry(self.op).spec
        shapes = {
            name: (value[0] if isinstance(value, tuple) else ())
            for name, value in self.inputs.items()
        }
        return spec.shape(shapes) if spec.result.ndim else ()


def matrix_fields(workload: Workload, seconds: float) -> dict[str, Any]:
    """What a matrix op's row adds to GB/s (Vulkan's and the compared library's alike):
    GFLOP/s, and what the op's entry adds (the shape; jacobi its sweeps and the time of one)."""
    fields: dict[str, Any] = {"gflops": workload.flops / seconds / 1e9}
    extra = workload.bench.fields
    if extra is not None:
        fields |= extra(workload.n, workload.product, seconds)
    return fields


def parse_shape(text: str) -> tuple[int, int, int]:
    """MxKxN (positive integers) as `--shapes` takes it."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(f"expected MxKxN (for example 4097x33x4095), got {text!r}")
    m, k, n = (int(part) for part in parts)
    return m, k, n


def default_sizes(op: str, device_local_bytes: int) -> list[int]:
    """Powers of two from the op's entry (4 from 2^10 for vectors, 2 from 2^8 for matrix
    sides) up to what fits in a quarter of the device-local memory, at most 2^28 elements
    (2^12 sides for matmul, 2^13 else)."""
    first, last, step = bench_of(op).sizes
    sizes = []
    for exponent in range(first, last + 1, step):
        size = 1 << exponent
        if Workload(op, size).device_bytes * 4 > device_local_bytes:
            break
        sizes.append(size)
    return sizes
