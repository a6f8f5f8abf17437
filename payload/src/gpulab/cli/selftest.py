"""`gpulab selftest`: every op on small data on a backend, compared with numpy in float64."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.cli.devices import device_summary, list_devices
from gpulab.cli.errors import EXIT_OK, EXIT_RUNTIME, BackendUnavailable
from gpulab.compute import GpuComputePipeline
from gpulab.vk import NoVulkanDevice

SIZES = (1, 255, 256, 257, 65539)
TOLERANCE = 1e-6
SEED = 2
BACKENDS = ("auto", "vulkan", "cpu", "native")

Op = Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]]


def _times_two_cpu(values: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    doubled: npt.NDArray[np.float32] = values * np.float32(2)
    return doubled


def _reference_times_two(values: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    return values.astype(np.float64) * 2


def max_relative_error(got: npt.NDArray[Any], expected: npt.NDArray[np.float64]) -> float:
    """max |got - expected| / max(|expected|, 1e-30)."""
    scale = np.maximum(np.abs(expected), 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - expected) / scale))


def run_checks(op_name: str, op: Op) -> list[dict[str, Any]]:
    """Run one op on every size against its float64 reference."""
    rng = np.random.default_rng(SEED)
    checks = []
    for n in SIZES:
        values = rng.uniform(-1.0, 1.0, n).astype(np.float32)
        error = max_relative_error(op(values), _reference_times_two(values))
        checks.append({"op": op_name, "n": n, "ok": error <= TOLERANCE, "max_rel_err": error})
    return checks


def resolve_backend(backend: str) -> str:
    """`auto` -> vulkan when a device exists, else cpu; native -> BackendUnavailable for now."""
    if backend == "native":
        raise BackendUnavailable(
            "the native backend is not built yet; use --backend vulkan or --backend cpu"
        )
    if backend == "auto":
        try:
            list_devices()
        except NoVulkanDevice:
            return "cpu"
        return "vulkan"
    return backend


def _device_indices(device: int | None) -> list[int]:
    infos = list_devices()
    if device is None:
        return [i.index for i in infos]
    if not 0 <= device < len(infos):
        raise NoVulkanDevice(
            "vkEnumeratePhysicalDevices",
            f"device index {device} does not exist",
            f"devices: 0..{len(infos) - 1} (see gpulab devices)",
        )
    return [device]


def _cpu_device() -> dict[str, Any]:
    return {
        "name": platform.processor() or platform.machine(),
        "type": "cpu",
        "driver": f"numpy {np.__version__}",
    }


def selftest(backend: str, device: int | None) -> dict[str, Any]:
    """The contract's selftest result; checks name their device, `devices` lists all tested."""
    chosen = resolve_backend(backend)
    if chosen == "cpu":
        checks = run_checks("times_two", _times_two_cpu)
        return {
            "ok": all(c["ok"] for c in checks),
            "backend": "cpu",
            "device": _cpu_device(),
            "checks": checks,
        }
    parts: list[dict[str, Any]] = []
    for index in _device_indices(device):
        with GpuComputePipeline(index) as pipeline:
            checks = [c | {"device": index} for c in run_checks("times_two", pipeline.execute)]
            parts.append({"device": device_summary(pipeline.info, full=False), "checks": checks})
    return {
        "ok": all(c["ok"] for part in parts for c in part["checks"]),
        "backend": "vulkan",
        "device": parts[0]["device"],
        "checks": [c for part in parts for c in part["checks"]],
        "devices": [part["device"] for part in parts],
    }


def run(backend: str, device: int | None, as_json: bool) -> int:
    """Print the result (JSON or one line per check); exit 4 when a check failed."""
    result = selftest(backend, device)
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        names = {d["index"]: d["name"] for d in result.get("devices", [])}
        for check in result["checks"]:
            name = names.get(check.get("device"), result["device"]["name"])
            status = "ok  " if check["ok"] else "FAIL"
            print(
                f"{status} {check['op']:<10} n={check['n']:<7} "
                f"max_rel_err={check['max_rel_err']:.3g}  ({result['backend']}: {name})"
            )
        verdict = "passed" if result["ok"] else "FAILED"
        print(f"selftest {verdict}: {len(result['checks'])} checks on {result['backend']}")
    return EXIT_OK if result["ok"] else EXIT_RUNTIME
