"""What a selftest case is made of: seeded random data of one size (see OpEntry.cases)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

LARGE_MATRIX = (1031, 1017)
"""The matrix for the 2**20 + 7 case: about 2**20 elements, neither side a power of two."""


@dataclass(frozen=True)
class Case:
    """One op on one input set."""

    op: str
    n: int
    inputs: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> list[int]:
        """The shape of the first array input (what the JSON reports)."""
        first = next(v for v in self.inputs.values() if isinstance(v, np.ndarray))
        return list(first.shape)


class Draw:
    """The data of one selftest size `n`: two shared vectors x and y, and more on demand, all
    from one seeded generator (the entries draw in registry order)."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        self.rng = rng
        self.n = n
        self.large_matrix = LARGE_MATRIX
        self.x = self.uniform(n)
        self.y = self.uniform(n)

    def uniform(self, shape: int | tuple[int, ...]) -> npt.NDArray[np.float32]:
        """Uniform on [-1, 1) as float32."""
        return self.rng.uniform(-1.0, 1.0, shape).astype(np.float32)

    def square_side(self) -> tuple[int, int]:
        """An n x n matrix's shape, or LARGE_MATRIX beyond 1025."""
        return (self.n, self.n) if self.n <= 1025 else LARGE_MATRIX

    def dominant(self, n: int) -> npt.NDArray[np.float32]:
        """A strictly diagonally dominant matrix: Jacobi converges on it."""
        a = self.uniform((n, n))
        a[np.diag_indices(n)] = np.abs(a).sum(axis=1) + 1.0
        return a
