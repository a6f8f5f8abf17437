"""`gpulab health` on the real device (lavapipe here, the H200 through the device tool):
healthy, no driver, no such device, wrong answer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from gpulab.cli.main import main
from gpulab.diagnostics import health

from tests.payload.test_cli import gpulab, no_driver_env


def test_the_device_is_healthy() -> None:
    report = health.check(0)
    assert report.status == "ok"
    assert report.failure is None
    assert report.device is not None
    assert report.device["name"]
    assert [(c.check, c.ok) for c in report.checks] == [("device", True), ("saxpy", True)]
    assert report.checks[1].detail == "saxpy on 1024 elements: exact"


def test_the_saxpy_probe_is_exact_in_float32() -> None:
    probe = health.saxpy_probe()
    x, y = probe.inputs["x"], probe.inputs["y"]
    exact = 3 * x.astype(np.float64) + y.astype(np.float64)
    assert np.array_equal(probe.expected.astype(np.float64), exact)


def test_a_wrong_answer_fails_naming_the_element() -> None:
    probe = health.saxpy_probe()
    expected = probe.expected.copy()
    expected[7] += 1
    report = health.check(0, health.Probe(probe.op, probe.inputs, expected))
    assert report.status == "failed"
    assert report.device is not None
    assert report.failure == (
        "saxpy: saxpy on 1024 elements: 1 of 1024 elements wrong "
        f"(index 7: got {probe.expected[7]!r}, expected {expected[7]!r})"
    )


def test_a_missing_device_is_unavailable() -> None:
    report = health.check(99)
    assert report.status == "unavailable"
    assert report.device is None
    assert report.failure == "device: device index 99 does not exist"


def test_the_command_prints_healthy_and_exits_0() -> None:
    done = gpulab("health")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("healthy: device 0: ")
    assert done.stderr == ""


def test_the_json_has_the_interface_keys() -> None:
    done = gpulab("health", "--device", "0", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result.keys() == {"ok", "device", "checks", "elapsed_ms"}
    assert result["ok"] is True
    assert result["device"]["index"] == 0
    assert [c["check"] for c in result["checks"]] == ["device", "saxpy"]
    assert all(c.keys() == {"check", "ok", "detail"} and c["ok"] for c in result["checks"])
    assert result["elapsed_ms"] > 0


@pytest.mark.parametrize("args", [[], ["--json"]])
def test_no_driver_exits_3_with_one_line(args: list[str]) -> None:
    done = gpulab("health", *args, env=no_driver_env())
    assert done.returncode == 3
    assert done.stderr == "gpulab health: device: the Vulkan loader found no compatible driver\n"
    if args:
        result = json.loads(done.stdout)
        assert (result["ok"], result["device"]) == (False, None)
    else:
        assert done.stdout == ""


# Mesa's drivers for hardware this machine lacks: the loader starts, then every driver fails.
# (Not lavapipe, which needs no hardware, nor a vendor's driver for a GPU that may be here.)
MESA_HARDWARE_DRIVERS = ("radeon", "intel", "nouveau", "virtio", "freedreno", "panfrost")
ABSENT_HARDWARE_ICDS = sorted(
    str(p)
    for p in Path("/usr/share/vulkan/icd.d").glob("*_icd.*.json")
    if p.name.split("_icd")[0] in MESA_HARDWARE_DRIVERS and not Path("/dev/dri").exists()
)


@pytest.mark.skipif(not ABSENT_HARDWARE_ICDS, reason="no Vulkan driver for absent hardware here")
@pytest.mark.parametrize("command", ["health", "devices"])
def test_drivers_that_find_no_hardware_exit_3(command: str) -> None:
    # What a lab worker shows with lavapipe's ICD moved away (the drill's fault).
    icds = ":".join(ABSENT_HARDWARE_ICDS)
    done = gpulab(command, env=os.environ | {"VK_ICD_FILENAMES": icds, "VK_DRIVER_FILES": icds})
    assert done.returncode == 3
    reason = "no Vulkan driver could be initialized (VK_ERROR_INITIALIZATION_FAILED)"
    assert reason in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_missing_device_index_exits_3() -> None:
    done = gpulab("health", "--device", "99")
    assert done.returncode == 3
    assert done.stderr == "gpulab health: device: device index 99 does not exist\n"


def test_a_wrong_answer_exits_4_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The real kernel runs; only the answer it is held to is off by one in one element.
    right = health.saxpy_probe()
    wrong = right.expected.copy()
    wrong[0] = -1
    monkeypatch.setattr(health, "saxpy_probe", lambda: health.Probe("saxpy", right.inputs, wrong))
    assert main(["health", "--device", "0"]) == 4
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("gpulab health: saxpy: saxpy on 1024 elements: 1 of 1024 elements wrong")
    assert err.count("\n") == 1
