"""`gpulab selftest`: every contract op at awkward sizes on a backend, against the reference.

Each op runs its entry's cases (gpulab.ops.entries) at sizes 1, 31, 32, 33, 1023, 1025 and
2**20 + 7 (matrix ops at shapes built from those sizes) on seeded random data, and its result
is compared with its reference under the tolerance policy of gpulab.ops.tolerance. Backends:
cpu (numpy in float32, independent of the reference's float64 accumulation), native (the C
library) and vulkan (--device N, else the GPUs Slurm allocated to the job, else every device).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.backends import resolve
from gpulab.backends.eager import EagerExecutor, NativeExecutor, cpu_executor
from gpulab.compute import GpuComputePipeline
from gpulab.diagnostics.devices import device_summary, list_devices
from gpulab.ops import tolerance
from gpulab.ops.cases import Case, Draw
from gpulab.ops.registry import entries, entry
from gpulab.placement import DeviceChoice, choose_device
from gpulab.vk import NoVulkanDevice

SIZES = (1, 31, 32, 33, 1023, 1025, 2**20 + 7)
TIMES_TWO_TOLERANCE = 1e-6
SEED = 2

Runner = Callable[..., Any]
Warn = Callable[[str], None]


def _uniform(rng: np.random.Generator, shape: int | tuple[int, ...]) -> npt.NDArray[np.float32]:
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


def cases() -> Iterator[Case]:
    """Every op's cases (its entry's) at every size, on seeded data."""
    rng = np.random.default_rng(SEED)
    for n in SIZES:
        draw = Draw(rng, n)
        for each in entries().values():
            for inputs, params in each.cases(draw):
                yield Case(each.name, n, inputs, params)


def numpy32(op: str, **arguments: Any) -> Any:
    """The op in plain float32 numpy (what a float32 CPU computes without wide accumulators)."""
    return entry(op).float32(np, **arguments)


def kernels_of(executor: EagerExecutor) -> Runner:
    """Calls `op` straight on a host backend's kernels (no graph around it)."""

    def run(op: str, **arguments: Any) -> Any:
        return executor.kernel(op)(**arguments)

    return run


def check(case: Case, run: Runner) -> dict[str, Any]:
    """Run one case and compare it with the reference under the tolerance policy."""
    arguments = case.inputs | case.params
    expected = entry(case.op).reference_function(**arguments)
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


def run_checks(run: Runner, runs: Callable[[str], bool] = lambda op: True) -> list[dict[str, Any]]:
    """Every case of the ops the runner `runs` (an op another package adds may lack a
    native function or a Vulkan recording)."""
    return [check(case, run) for case in cases() if runs(case.op)]


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
        kernels = pipeline.session.kernels  # the ops on the same device session
        checks += run_checks(kernels.run, kernels.records)
    return summary, [c | {"device": index} for c in checks]


def _host_selftest(backend: str) -> dict[str, Any]:
    if backend == "cpu":
        # numpy in float32, not the cpu backend's kernels: those are the reference itself.
        checks = _times_two_checks(lambda v: v * np.float32(2)) + run_checks(numpy32)
        summary = cpu_executor().device
    else:
        native = NativeExecutor()
        checks = run_checks(kernels_of(native), lambda op: entry(op).native is not None)
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
