"""jacobi: `iterations` Jacobi steps for A x = b from x0 = 0, optionally stopping early; its
extra output is the solver's report (steps run, convergence, last update)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from gpulab._shown import shown
from gpulab.ops.entry import Bench, OpEntry
from gpulab.ops.solver import SolverReport, solve
from gpulab.ops.spec import Kind, OpSpec, ParamSpec, Shape, ShapeError

JACOBI_ITERATIONS = (30, 8)
"""selftest's steps up to 33 unknowns, and beyond (lavapipe runs a 1031-row step in ~0.1 s)."""
JACOBI_TOLERANCE = 1e-5
MAX_ITERATIONS = 100_000
BENCH_STEPS = 10
"""bench runs this many steps per op (one submission)."""


def _shape(shapes: Any) -> Shape:
    (m, n), (length,) = shapes["A"], shapes["b"]
    if m != n:
        raise ShapeError("A", f"jacobi needs a square matrix A, got {shown(m)}x{shown(n)}")
    if length != n:
        raise ShapeError(
            "b", f"A is {shown(m)}x{shown(n)} so b needs {shown(n)} elements, got {shown(length)}"
        )
    return (n,)


def _bound(b: ModuleType, inputs: Any, ref: Any, params: Mapping[str, Any]) -> Any:
    """Each step is a dot per row, bounded like a row of matvec scaled by 1 / |A_ii|; the
    iteration contracts earlier errors by rho = max_i sum_j!=i |A_ij| / |A_ii|, so the
    accumulated bound is that step bound times min(iterations, 1 / (1 - rho))."""
    np = b.np
    iterations = int(params.get("iterations", 0))
    a, rhs = b.wide(inputs["A"]), b.wide(inputs["b"])
    n = rhs.size
    diagonal = np.abs(np.diag(a))
    off = np.abs(a) - np.diag(diagonal)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = (b.depth(n) + 3) * b.EPS32 * (np.abs(rhs) + off @ np.abs(ref)) / diagonal
        rho = float(np.max(off.sum(axis=1) / diagonal)) if n else 0.0
    growth = float(iterations) if rho >= 1 else min(float(iterations), 1 / (1 - rho))
    return step * max(growth, 1.0) + 2 * b.EPS32 * np.abs(ref)


def _float32(
    np: ModuleType, A: Any, b: Any, iterations: int, tolerance: float | None = None
) -> Any:
    diagonal = np.diag(A)
    x = np.zeros_like(b)
    for _ in range(iterations):
        following = (b - (A @ x - diagonal * x)) / diagonal
        update = float(np.max(np.abs(following - x)))
        x = following
        if tolerance is not None and update < tolerance:
            break
    return x


def _cases(d: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    side = min(d.n, d.large_matrix[0])
    system = {"A": d.dominant(side), "b": d.uniform(side)}
    steps = JACOBI_ITERATIONS[0] if d.n <= 33 else JACOBI_ITERATIONS[1]
    return [
        (system, {"iterations": steps}),
        (system, {"iterations": steps, "tolerance": JACOBI_TOLERANCE}),
    ]


def _host(
    functions: Callable[[str], Callable[..., Any]], arguments: dict[str, Any]
) -> tuple[Any, SolverReport]:
    """A host backend runs its own step function under the shared loop."""
    return solve(functions("jacobi_step"), **arguments)


def _check(node: str, extras: Mapping[str, Any]) -> SolverReport | None:
    report: SolverReport = extras["solver"]
    return report


def _compare(xp: Any, torch: bool, v: Mapping[str, Any]) -> Callable[[], Any]:
    a, rhs, out = v["A"], v["b"], v["out"]
    diagonal = xp.diagonal(a).clone() if torch else xp.diagonal(a).copy()

    def run() -> Any:
        x = out * 0
        for _ in range(BENCH_STEPS):
            x = (rhs - (a @ x - diagonal * x)) / diagonal
        return x

    return run


def _fields(n: int, dims: tuple[int, int, int], seconds: float) -> dict[str, Any]:
    return {"shape": [n, n], "sweeps": BENCH_STEPS, "sweep_ms": seconds * 1e3 / BENCH_STEPS}


JACOBI = OpEntry(
    spec=OpSpec(
        "jacobi",
        (("A", Kind.MATRIX), ("b", Kind.VECTOR)),
        Kind.VECTOR,
        _shape,
        params=(
            ParamSpec(
                "iterations",
                int,
                required=True,
                minimum=0,
                # One dispatch per step on Vulkan: a count beyond this is a runaway loop (or
                # a denial of service), not a setting; use `tolerance`.
                maximum=MAX_ITERATIONS,
                description="Jacobi steps from x0 = 0",
            ),
            ParamSpec(
                "tolerance",
                float,
                required=False,
                minimum=0,
                exclusive_minimum=True,
                description="stop after the first step whose update has a max-norm below it",
            ),
        ),
        description="x after `iterations` Jacobi steps for A x = b from x0 = 0",
    ),
    reference="gpulab.ops.reference:jacobi",
    native="gpulab.native.kernels:jacobi",
    tolerance=_bound,
    float32=_float32,
    cases=_cases,
    bench=Bench(
        bytes_moved=lambda n, dims: 4 * BENCH_STEPS * (n * n + 3 * n),
        flops=lambda n, dims: BENCH_STEPS * 2 * n * n,
        inputs=lambda n, dims: {"A": ((n, n), 0.25), "b": ((n,), 0.5)},
        matrix=True,
        params={"iterations": BENCH_STEPS},
        fields=_fields,
        compare=_compare,
        sizes=(8, 13, 1),
    ),
    host=_host,
    check=_check,
    one_binding=True,
)

ENTRIES = (JACOBI,)
