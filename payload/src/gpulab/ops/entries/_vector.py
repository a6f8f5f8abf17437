"""What the vector ops' entries share: bench's inputs and counts for n elements."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpulab.ops.entry import Bench

X, Y, A = 0.5, -0.25, 1.5
"""bench's fill values of x and y, and its scalar a."""

Compare = Callable[[Any, bool, Mapping[str, Any]], Callable[[], Any]]


def vector_bench(
    arrays: int, *, y: bool = False, a: bool = False, compare: Compare | None = None
) -> Bench:
    """bench of a vector op that moves `arrays` arrays of n floats (each read or written
    once), on x (and y, and the scalar a)."""

    def inputs(n: int, dims: tuple[int, int, int]) -> dict[str, Any]:
        made: dict[str, Any] = {"x": ((n,), X)}
        if y:
            made["y"] = ((n,), Y)
        if a:
            made["a"] = A
        return made

    return Bench(
        bytes_moved=lambda n, dims: 4 * arrays * n,
        flops=lambda n, dims: n,
        inputs=inputs,
        compare=compare,
    )
