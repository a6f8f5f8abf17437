"""Native kernels against numpy, and the suballocator's throughput from Python.

    python -m gpulab.diagnostics.native_bench [--sizes 20 24] [--repeat 5]

Prints the best time per op of `repeat` runs after a warm-up, at 2^k elements (for matrix
ops, the elements of A), and allocate/free pairs per second through the Python owner.
A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from gpulab.native import NativeUnavailable, kernels
from gpulab.native.suballocator import Suballocator

# matmul costs n^1.5 multiply-adds for n elements per matrix: beyond 2^22 it takes minutes.
MATMUL_MAX_ELEMENTS = 1 << 22
Array = npt.NDArray[np.float32]
Case = tuple[str, Callable[[], object], Callable[[], object]]


def best_ms(run: Callable[[], object], repeat: int) -> float:
    run()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def numpy_jacobi_step(a: Array, b: Array, x: Array) -> Array:
    diagonal = np.diagonal(a)
    result: Array = (b - (a @ x - diagonal * x)) / diagonal
    return result


def cases(n: int) -> Iterator[Case]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    y = rng.uniform(-1, 1, n).astype(np.float32)
    yield "add", lambda: kernels.add(x, y), lambda: np.add(x, y)
    yield "scale", lambda: kernels.scale(x, 2.0), lambda: np.float32(2.0) * x
    yield "saxpy", lambda: kernels.saxpy(2.0, x, y), lambda: np.float32(2.0) * x + y
    yield "sum", lambda: kernels.sum(x), lambda: np.sum(x)
    yield "min", lambda: kernels.min(x), lambda: np.min(x)
    yield "max", lambda: kernels.max(x), lambda: np.max(x)
    yield "dot", lambda: kernels.dot(x, y), lambda: np.dot(x, y)
    yield "l2_norm", lambda: kernels.l2_norm(x), lambda: np.linalg.norm(x)
    side = round(n**0.5)
    a = rng.uniform(-1, 1, (side, side)).astype(np.float32)
    a[np.diag_indices(side)] += side
    v = x[:side]
    yield "matvec", lambda: kernels.matvec(a, v), lambda: a @ v
    yield "jacobi_step", lambda: kernels.jacobi_step(a, v, v), lambda: numpy_jacobi_step(a, v, v)
    if n <= MATMUL_MAX_ELEMENTS:
        yield "matmul", lambda: kernels.matmul(a, a), lambda: a @ a


def allocator_pairs_per_second(pairs: int) -> float:
    sizes = [random.Random(1).randrange(256, 1 << 20) for _ in range(1024)]
    with Suballocator(1 << 30) as allocator:
        for size in sizes[:512]:  # some live allocations, so the free lists are not trivial
            allocator.allocate(size, 256)
        start = time.perf_counter()
        for i in range(pairs):
            allocator.free(allocator.allocate(sizes[i % 1024], 256))
        return pairs / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpulab.diagnostics.native_bench", description=__doc__
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 24], metavar="LOG2")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=200_000)
    args = parser.parse_args(argv)
    try:
        library = kernels.library()
    except NativeUnavailable as error:
        print(f"gpulab.diagnostics.native_bench: {error}", file=sys.stderr)
        return 3

    print(f"{library.path} on {platform.machine()}, numpy {np.__version__}")
    print(f"{'op':<12} {'n':>5} {'native ms':>10} {'numpy ms':>10} {'numpy/native':>13}")
    for log2 in args.sizes:
        for name, native, reference in cases(1 << log2):
            native_ms, numpy_ms = best_ms(native, args.repeat), best_ms(reference, args.repeat)
            label = f"2^{log2}"
            print(
                f"{name:<12} {label:>5} {native_ms:10.3f} {numpy_ms:10.3f}"
                f" {numpy_ms / native_ms:12.2f}x"
            )
        if (1 << log2) > MATMUL_MAX_ELEMENTS:
            print(f"{'matmul':<12} {f'2^{log2}':>5}    skipped (n^1.5 work: minutes)")
    rate = allocator_pairs_per_second(args.pairs)
    print(f"suballocator: {rate:,.0f} allocate/free pairs per second from Python")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
