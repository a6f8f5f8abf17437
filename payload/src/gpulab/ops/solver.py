"""How an iterative solve (jacobi) went: steps run, whether it converged, the last update.

Every backend reports the same three numbers for a jacobi node (the result's
`nodes[].solver`): the steps that ran, the max-norm of the last step's update (`residual`),
and `converged`: a tolerance was given and the last update fell below it (without a tolerance
there is nothing to converge to, so it is false). A residual that is not finite is a
NumericalError (exit 4); stopping at the iteration limit short of the tolerance is a warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpulab._shown import shown

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float32]

Step = Callable[["FloatArray"], tuple["FloatArray", float]]
"""x -> (the next iterate, the max-norm of the update)."""


@dataclass(frozen=True)
class SolverReport:
    """What one jacobi solve did."""

    iterations: int
    residual: float
    """The max-norm of the last step's update; 0.0 when no step ran."""
    tolerance: float | None = None

    @property
    def converged(self) -> bool:
        return self.tolerance is not None and self.iterations > 0 and self.residual < self.tolerance

    def to_json(self) -> dict[str, Any]:
        """The result's `solver` entry of the node."""
        return {
            "iterations": self.iterations,
            "converged": self.converged,
            "residual": self.residual,
        }

    def failure(self, node: str) -> str | None:
        """The NumericalError message when the solve diverged (a residual not finite)."""
        if math.isfinite(self.residual):
            return None
        return (
            f"node {shown(node)} (jacobi): the update of step {self.iterations} is not finite "
            "(a singular or diverging system)"
        )

    def warning(self, node: str) -> str | None:
        """The result's warning when a tolerance was given and not reached."""
        if self.tolerance is None or self.converged:
            return None
        return (
            f"node {shown(node)} (jacobi): stopped at the iteration limit ({self.iterations}) "
            f"without converging: last update {self.residual:.3g}, tolerance {self.tolerance:g}"
        )


def solve(
    step: Callable[[Any, Any, FloatArray], tuple[FloatArray, float]],
    A: Any,
    b: Any,
    iterations: int,
    tolerance: float | None = None,
) -> tuple[FloatArray, SolverReport]:
    """jacobi with `step(A, b, x)` (a backend's one step) from x0 = 0: x and the report."""
    # numpy only here: gpulab validate reads jacobi's entry, which imports this module.
    import numpy as np  # noqa: PLC0415

    start = np.zeros(np.shape(b), dtype=np.float32)
    return iterate(lambda x: step(A, b, x), start, iterations, tolerance)


def iterate(
    step: Step, start: FloatArray, iterations: int, tolerance: float | None
) -> tuple[FloatArray, SolverReport]:
    """Up to `iterations` steps from `start`, stopping after the first step whose update is
    below `tolerance` (when given): the last iterate and the report."""
    if iterations < 0:
        raise ValueError(f"jacobi: iterations must be at least 0, got {iterations}")
    current, update, ran = start, 0.0, 0
    for _ in range(iterations):
        current, update = step(current)
        ran += 1
        if tolerance is not None and update < tolerance:
            break
    return current, SolverReport(ran, update, tolerance)
