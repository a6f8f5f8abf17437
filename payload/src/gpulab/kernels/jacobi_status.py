"""jacobi's status words (shaders/jacobi.glsl), read back as a SolverReport."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpulab.ops.solver import SolverReport

STATUS_WORDS = 8
"""uint32 words: 0-2 each step's update (float bits, by step % 3), 3 stopped, 4 steps run."""


def solver_report(status: npt.NDArray[np.float32], tolerance: float | None) -> SolverReport:
    """The report of a jacobi run from its status buffer as read back (float32 bit patterns)."""
    words = np.ascontiguousarray(status, dtype=np.float32).view(np.uint32)
    ran = int(words[4])
    residual = float(words[(ran - 1) % 3 : (ran - 1) % 3 + 1].view(np.float32)[0]) if ran else 0.0
    return SolverReport(ran, residual, tolerance)
