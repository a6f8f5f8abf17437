"""The `gpulab` command as users and scripts run it: a subprocess, its output and exit code."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

# The installed console script; `python -m gpulab` where the package is only on the path.
SCRIPT = Path(sys.executable).with_name("gpulab")
GPULAB = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "gpulab"]
PYTHONPATH = os.pathsep.join(
    str(Path(entry).resolve())
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if entry
)
"""The environment's PYTHONPATH made absolute: where the gpulab under test is only on the path,
GPULAB runs it from any directory with this."""
CONTRACT_DEVICES = (
    "index, name, type, driver, api_version, subgroup_size, max_workgroup_invocations, "
    "device_local_bytes"
)
"""The keys of `gpulab devices --json` as CONTRACT.md lists them (not the code's own tuple)."""
CONTRACT_DEVICE_KEYS = set(CONTRACT_DEVICES.split(", "))
SAXPY_NORM = str(Path(__file__).resolve().parents[2] / "payload/examples/saxpy_norm.json")


def gpulab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPULAB, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def no_driver_env() -> dict[str, str]:
    """An environment in which the loader finds no Vulkan driver at all."""
    env = dict(os.environ)
    env["VK_ICD_FILENAMES"] = "/nonexistent/icd.json"
    env["VK_DRIVER_FILES"] = "/nonexistent/icd.json"
    return env


def test_devices_json_lists_llvmpipe_with_the_contract_keys() -> None:
    done = gpulab("devices", "--json")
    assert done.returncode == 0, done.stderr
    devices = json.loads(done.stdout)
    assert [d["index"] for d in devices] == list(range(len(devices)))
    for device in devices:
        assert device.keys() >= CONTRACT_DEVICE_KEYS
        assert device["type"] in {"discrete", "integrated", "virtual", "cpu", "other"}
    lavapipe = [d for d in devices if "llvmpipe" in d["name"]]
    assert lavapipe, devices
    assert lavapipe[0]["type"] == "cpu"
    assert lavapipe[0]["subgroup_size"] > 0
    assert lavapipe[0]["device_local_bytes"] > 0


def test_devices_table_names_the_device() -> None:
    done = gpulab("devices")
    assert done.returncode == 0, done.stderr
    assert "llvmpipe" in done.stdout
    assert "subgroup operations" in done.stdout


@pytest.mark.parametrize("backend", ["vulkan", "cpu", "auto"])
def test_selftest_json_passes(backend: str) -> None:
    done = gpulab("selftest", "--backend", backend, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] is True
    assert result["backend"] == ("cpu" if backend == "cpu" else "vulkan")
    assert {"name", "type", "driver"} <= result["device"].keys()
    assert result["checks"]
    for check in result["checks"]:
        assert {"op", "n", "ok", "max_rel_err"} <= check.keys()
        assert check["ok"] is True


@pytest.mark.parametrize("backend", ["cpu", "native"])
def test_host_backends_name_the_machine_they_run_on(backend: str) -> None:
    """device.arch is the interpreter's machine: the model name may be the host's under
    qemu-user (molecule/mixed-arch checks arch against the node's architecture)."""
    done = gpulab("selftest", "--backend", backend, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["device"]["arch"] == platform.machine()


def test_selftest_on_one_device_prints_a_verdict() -> None:
    done = gpulab("selftest", "--device", "0")
    assert done.returncode == 0, done.stderr
    assert "selftest passed" in done.stdout


@pytest.mark.parametrize(
    "args",
    [["--bogus"], ["selftest", "--backend", "cuda"], ["selftest", "--device", "x"], []],
)
def test_bad_flags_exit_2(args: list[str]) -> None:
    done = gpulab(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args", [["devices"], ["devices", "--json"], ["selftest", "--backend", "vulkan"]]
)
def test_no_vulkan_driver_exits_3_with_one_line(args: list[str]) -> None:
    done = gpulab(*args, env=no_driver_env())
    assert done.returncode == 3
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "mesa-vulkan-drivers" in lines[0]


def test_auto_falls_back_to_cpu_without_a_driver() -> None:
    done = gpulab("selftest", "--json", env=no_driver_env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["backend"] == "cpu"


def outside_slurm(env: dict[str, str]) -> dict[str, str]:
    """env without the variables of any Slurm job the tests may run in."""
    return {name: value for name, value in env.items() if not name.startswith("SLURM")}


def test_auto_in_a_slurm_job_given_no_gpu_runs_on_cpu_and_says_how_to_ask() -> None:
    in_job = gpulab("run", SAXPY_NORM, env=outside_slurm(no_driver_env()) | {"SLURM_JOB_ID": "12"})
    assert in_job.returncode == 0, in_job.stderr
    assert json.loads(in_job.stdout)["backend"] == "cpu"
    assert (
        "gpulab: auto chose cpu: no Vulkan device was found (Slurm job 12 was given no GPU: "
        "ask with --gres=gpu:1 or gpulab submit --gpus 1)\n"
    ) in in_job.stderr
    outside = gpulab("run", SAXPY_NORM, env=outside_slurm(no_driver_env()))
    assert outside.returncode == 0, outside.stderr
    assert "gpulab: auto chose cpu: no Vulkan device was found\n" in outside.stderr
    assert "Slurm" not in outside.stderr


@pytest.mark.parametrize("slurm", [{}, {"SLURM_JOB_ID": "12"}])
def test_run_on_vulkan_without_a_device_exits_3_with_one_line(slurm: dict[str, str]) -> None:
    env = outside_slurm(no_driver_env()) | slurm
    done = gpulab("run", SAXPY_NORM, "--backend", "vulkan", env=env)
    assert done.returncode == 3
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("gpulab: the Vulkan backend is unavailable: ")
    assert "Traceback" not in done.stderr


def test_a_missing_device_index_exits_3() -> None:
    done = gpulab("selftest", "--backend", "vulkan", "--device", "99")
    assert done.returncode == 3
    assert "device index 99" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_native_backend_is_unavailable_without_its_library(tmp_path: Path) -> None:
    env = os.environ | {"GPULAB_NATIVE_LIB_DIR": str(tmp_path)}
    done = gpulab("selftest", "--backend", "native", env=env)
    assert done.returncode == 3
    assert "native" in done.stderr
    assert "Traceback" not in done.stderr
