"""`gpulab selftest`: every contract op at awkward sizes on a backend, against the reference.

Each op runs at sizes 1, 31, 32, 33, 1023, 1025 and 2**20 + 7 (matrix ops at shapes built from
those sizes) on seeded random data, and its result is compared with gpulab.ops.reference under
the tolerance policy of gpulab.ops.tolerance. Backends: cpu (numpy in float32, independent of
the reference's float64 accumulation), native (the C library) and vulkan (--device N, else the
GPUs Slurm allocated to the job, else every device).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.backends import DeviceChoice, choose_device, resolve
from gpulab.backends.eager import EagerExecutor, NativeExecutor, cpu_executor
from gpulab.backends.vulkan import VulkanExecutor
from gpulab.compute import GpuComputePipeline
from gpulab.diagnostics.devices import device_summary, list_devices
from gpulab.ops import reference, tolerance
from gpulab.vk import NoVulkanDevice

SIZES = (1, 31, 32, 33, 1023, 1025, 2**20 + 7)
LARGE_MATRIX = (1031, 1017)
"""The matrix for the 2**20 + 7 case: about 2**20 elements, neither side a power of two."""
MATMUL_INNER = (65, 31)
"""matmul's inner and output-column sizes beyond 33 rows (a full 1025^3 product takes seconds on
lavapipe and tells no more than these awkward shapes)."""
JACOBI_ITERATIONS = (30, 8)
"""Jacobi steps up to 33 unknowns, and beyond (lavapipe runs a 1031-row step in ~0.1 s)."""
JACOBI_TOLERANCE = 1e-5
TIMES_TWO_TOLERANCE = 1e-6
SEED = 2

Runner = Callable[..., Any]
Warn = Callable[[str], None]


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


def _uniform(rng: np.random.Generator, shape: int | tuple[int, ...]) -> npt.NDArray[np.float32]:
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


def _square_side(n: int) -> tuple[int, int]:
    return (n, n) if n <= 1025 else LARGE_MATRIX


def _dominant(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    """A strictly diagonally dominant matrix: Jacobi converges on it."""
    a = _uniform(rng, (n, n))
    a[np.diag_indices(n)] = np.abs(a).sum(axis=1) + 1.0
    return a


def cases() -> Iterator[Case]:
    """Every op at every size, on seeded data."""
    rng = np.random.default_rng(SEED)
    for n in SIZES:
        x, y = _uniform(rng, n), _uniform(rng, n)
        yield Case("add", n, {"x": x, "y": y})
        yield Case("scale", n, {"x": x, "a": -2.5})
        yield Case("saxpy", n, {"a": 1.5, "x": x, "y": y})
        for op in ("sum", "min", "max", "l2_norm", "normalize"):
            yield Case(op, n, {"x": x})
        yield Case("dot", n, {"x": x, "y": y})
        rows, cols = _square_side(n)
        yield Case("matvec", n, {"A": _uniform(rng, (rows, cols)), "x": _uniform(rng, cols)})
        inner, columns = (cols, cols) if n <= 33 else MATMUL_INNER
        a, b = _uniform(rng, (rows, inner)), _uniform(rng, (inner, columns))
        yield Case("matmul", n, {"A": a, "B": b})
        side = min(n, LARGE_MATRIX[0])
        system = {"A": _dominant(rng, side), "b": _uniform(rng, side)}
        steps = JACOBI_ITERATIONS[0] if n <= 33 else JACOBI_ITERATIONS[1]
        yield Case("jacobi", n, system, {"iterations": steps})
        yield Case("jacobi", n, system, {"iterations": steps, "tolerance": JACOBI_TOLERANCE})


def _numpy32_jacobi(
    A: npt.NDArray[np.float32], b: npt.NDArray[np.float32], iterations: int, tolerance: float | None
) -> npt.NDArray[np.float32]:
    diagonal = np.diag(A)
    x = np.zeros_like(b)
    for _ in range(iterations):
        following = (b - (A @ x - diagonal * x)) / diagonal
        update = float(np.max(np.abs(following - x)))
        x = following
        if tolerance is not None and update < tolerance:
            break
    return x


def numpy32(op: str, **arguments: Any) -> Any:
    """The op in plain float32 numpy (what a float32 CPU computes without wide accumulators)."""
    x: Any = arguments.get("x")
    y: Any = arguments.get("y")
    table: dict[str, Callable[[], Any]] = {
        "add": lambda: x + y,
        "scale": lambda: np.float32(arguments.get("a", 0.0)) * x,
        "saxpy": lambda: np.float32(arguments.get("a", 0.0)) * x + y,
        "sum": lambda: np.sum(x),
        "min": lambda: np.min(x),
        "max": lambda: np.max(x),
        "dot": lambda: np.dot(x, y),
        "l2_norm": lambda: np.linalg.norm(x),
        "normalize": lambda: x / np.linalg.norm(x),
        "matvec": lambda: arguments["A"] @ x,
        "matmul": lambda: arguments["A"] @ arguments["B"],
        "jacobi": lambda: _numpy32_jacobi(
            arguments["A"], arguments["b"], arguments["iterations"], arguments.get("tolerance")
        ),
    }
    return table[op]()


def kernels_of(executor: EagerExecutor) -> Runner:
    """Calls `op` straight on a host backend's kernels (no graph around it)."""

    def run(op: str, **arguments: Any) -> Any:
        return executor.kernel(op)(**arguments)

    return run


def check(case: Case, run: Runner) -> dict[str, Any]:
    """Run one case and compare it with the reference under the tolerance policy."""
    arguments = case.inputs | case.params
    expected = getattr(reference, case.op)(**arguments)
    got = run(case.op, **arguments)
    outcome = tolerance.compare(case.op, got, expected, case.inputs, case.params)
    result = {
        "op": case.op,
        "n": case.n,
        "ok": outcome.ok,
        "max_rel_err": outcome.max_rel_err,
        "bound_ratio": outcome.bound_ratio,
        "shape": case.shape,
    }
    return result | ({"params": case.params} if case.params else {})


def _times_two_checks(run: Callable[[npt.NDArray[np.float32]], Any]) -> list[dict[str, Any]]:
    """The original check: 2 * x through the high-level GpuComputePipeline."""
    rng = np.random.default_rng(SEED)
    checks = []
    for n in (1, 255, 256, 257, 65539):
        values = _uniform(rng, n)
        expected = values.astype(np.float64) * 2
        error = float(np.max(np.abs(run(values) - expected) / np.maximum(np.abs(expected), 1e-30)))
        ok = error <= TIMES_TWO_TOLERANCE
        checks.append({"op": "times_two", "n": n, "ok": ok, "max_rel_err": error})
    return checks


def run_checks(run: Runner) -> list[dict[str, Any]]:
    """Every case on one runner."""
    return [check(case, run) for case in cases()]


def _devices(device: int | None, choice: DeviceChoice, warn: Warn) -> list[int]:
    """The devices to test: --device N, else the GPUs Slurm allocated, else every device."""
    infos = list_devices()
    if device is None:
        return list(choice.allocated) or [i.index for i in infos]
    if not 0 <= device < len(infos):
        raise NoVulkanDevice(
            "vkEnumeratePhysicalDevices",
            f"device index {device} does not exist",
            f"devices: 0..{len(infos) - 1} (see gpulab devices)",
        )
    if choice.warning is not None:
        warn(choice.warning)
    return [device]


def _vulkan_checks(index: int, chosen_by: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with GpuComputePipeline(index) as pipeline:
        checks = _times_two_checks(pipeline.execute)
        summary = device_summary(pipeline.info, full=False) | {"chosen_by": chosen_by}
    with VulkanExecutor(index) as executor:
        checks += run_checks(executor.kernels.run)
    return summary, [c | {"device": index} for c in checks]


def _host_selftest(backend: str) -> dict[str, Any]:
    if backend == "cpu":
        # numpy in float32, not the cpu backend's kernels: those are the reference itself.
        checks = _times_two_checks(lambda v: v * np.float32(2)) + run_checks(numpy32)
        summary = cpu_executor().device
    else:
        native = NativeExecutor()
        checks = run_checks(kernels_of(native))
        summary = native.device
    return {
        "ok": all(c["ok"] for c in checks),
        "backend": backend,
        "device": summary,
        "checks": checks,
    }


def selftest(backend: str, device: int | None, warn: Warn) -> dict[str, Any]:
    """The contract's selftest result; checks name their device, `devices` lists all tested.
    `auto` resolves as a graph run's does; `warn` gets a line on a questionable --device."""
    # Like a graph run, a cpu or native selftest never looks for Vulkan devices.
    choice = choose_device(device) if backend in ("auto", "vulkan") else None
    chosen, _ = resolve(backend, choice)
    if choice is None or chosen != "vulkan":
        return _host_selftest(chosen)
    parts = [
        _vulkan_checks(index, choice.chosen_by_for(index))
        for index in _devices(device, choice, warn)
    ]
    return {
        "ok": all(c["ok"] for _, checks in parts for c in checks),
        "backend": "vulkan",
        "device": parts[0][0],
        "checks": [c for _, checks in parts for c in checks],
        "devices": [summary for summary, _ in parts],
    }


def text(result: dict[str, Any]) -> str:
    """The result as one line per check and a verdict."""
    names = {d["index"]: d["name"] for d in result.get("devices", [])}
    lines = []
    for item in result["checks"]:
        name = names.get(item.get("device"), result["device"]["name"])
        status = "ok  " if item["ok"] else "FAIL"
        extra = " tol" if item.get("params", {}).get("tolerance") else ""
        ratio = item.get("bound_ratio", 0.0)
        lines.append(
            f"{status} {item['op'] + extra:<13} n={item['n']:<8} "
            f"max_rel_err={item['max_rel_err']:.3g}  bound_ratio={ratio:.3g}"
            f"  ({result['backend']}: {name})"
        )
    verdict = "passed" if result["ok"] else "FAILED"
    lines.append(f"selftest {verdict}: {len(result['checks'])} checks on {result['backend']}")
    return "\n".join(lines)
