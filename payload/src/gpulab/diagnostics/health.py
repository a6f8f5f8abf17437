"""The GPU health check: the Vulkan device is there and a tiny kernel gives the exact answer.

What `gpulab health` runs, and through it Slurm's HealthCheckProgram on every GPU worker (the
check a Jetson gets, where NVML does not work). It is short on purpose: one device, one
saxpy on 1024 elements whose answer is known exactly, so it runs every few minutes at no cost.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from gpulab.kernels import DeviceSession
from gpulab.placement.device_choice import choose_device
from gpulab.vk import DeviceInfo, NoVulkanDevice, VulkanError, shared_instance

Status = Literal["ok", "unavailable", "failed"]
DEVICE_KEYS = ("index", "name", "type", "driver", "api_version", "driver_info")


@dataclass(frozen=True)
class Probe:
    """One kernel run whose exact answer is known in advance."""

    op: str
    inputs: Mapping[str, Any]
    expected: npt.NDArray[np.float32]


def saxpy_probe(n: int = 1024) -> Probe:
    """saxpy on small integers: every product and sum is exact in float32, fused or not, so
    any healthy device returns exactly `expected`."""
    x = np.arange(n, dtype=np.float32)
    y = np.arange(n, 0, -1, dtype=np.float32)
    a = np.float32(3.0)
    return Probe("saxpy", {"a": float(a), "x": x, "y": y}, a * x + y)


@dataclass(frozen=True)
class Check:
    """One step of the health check and what it found."""

    check: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class HealthReport:
    """The checks run on one device; `status` decides the exit code (0, 3 or 4)."""

    status: Status
    device: dict[str, Any] | None
    checks: tuple[Check, ...]
    elapsed_ms: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def failure(self) -> str | None:
        """The first failing check as `check: detail`; None when healthy."""
        failed = next((c for c in self.checks if not c.ok), None)
        return None if failed is None else f"{failed.check}: {failed.detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "device": self.device,
            "checks": [{"check": c.check, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "elapsed_ms": round(self.elapsed_ms, 3),
        }


def _device_summary(info: DeviceInfo) -> dict[str, Any]:
    everything = info.to_dict()
    return {key: everything[key] for key in DEVICE_KEYS}


def _wrong_elements(got: Any, expected: npt.NDArray[np.float32]) -> str | None:
    """None when `got` is exactly `expected`; else what is wrong, in a few words."""
    values = np.asarray(got)
    if values.shape != expected.shape:
        return f"result shape {values.shape}, expected {expected.shape}"
    wrong = np.flatnonzero(values != expected)
    if wrong.size == 0:
        return None
    first = int(wrong[0])
    return (
        f"{wrong.size} of {expected.size} elements wrong "
        f"(index {first}: got {values[first]!r}, expected {expected[first]!r})"
    )


def _run_probe(info_index: int, probe: Probe) -> Check:
    size = next(v.size for v in probe.inputs.values() if isinstance(v, np.ndarray))
    try:
        with DeviceSession(info_index) as session:
            got = session.kernels.run(probe.op, **probe.inputs)
    except (VulkanError, MemoryError) as exc:
        return Check(probe.op, False, str(exc) or type(exc).__name__)
    wrong = _wrong_elements(got, probe.expected)
    if wrong is not None:
        return Check(probe.op, False, f"{probe.op} on {size} elements: {wrong}")
    return Check(probe.op, True, f"{probe.op} on {size} elements: exact")


def check(device: int | None = None, probe: Probe | None = None) -> HealthReport:
    """Check device `device` (None: the one a run would use) with `probe` (default saxpy).

    "unavailable" when there is no loader, driver or such device; "failed" when the device is
    there but the kernel fails or gives a wrong answer (device lost, out of memory, bad result).
    """
    start = time.perf_counter()

    def report(status: Status, summary: dict[str, Any] | None, *checks: Check) -> HealthReport:
        return HealthReport(status, summary, checks, (time.perf_counter() - start) * 1000)

    choice = choose_device(device)
    try:
        info = shared_instance().physical_device(choice.index).info
    except NoVulkanDevice as exc:
        return report("unavailable", None, Check("device", False, exc.reason))
    except (VulkanError, OSError) as exc:
        return report("unavailable", None, Check("device", False, str(exc)))
    summary = _device_summary(info)
    found = Check("device", True, f"device {info.index}: {info.name}")
    ran = _run_probe(info.index, probe or saxpy_probe())
    return report("ok" if ran.ok else "failed", summary, found, ran)
