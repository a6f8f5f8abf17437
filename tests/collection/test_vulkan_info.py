"""gpulab.cluster.vulkan_info: the command it runs, how it reads vulkaninfo, and absence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import (
    CommandResult,
    SlurmRunner,
)
from ansible_collections.gpulab.cluster.plugins.modules import vulkan_info
from ansible_collections.gpulab.cluster.plugins.modules.vulkan_info import (
    ARGUMENT_SPEC,
    device_nodes,
    probe,
)

from .fakes import FakeRunner

FIXTURES = Path(__file__).parent / "fixtures"
# Captured on the development machine (Debian 12, mesa 22.3.6): `vulkaninfo --summary`.
LAVAPIPE = (FIXTURES / "vulkaninfo-summary-lavapipe.txt").read_text()
ARGV = ["/usr/bin/vulkaninfo", "--summary"]

# Two NVIDIA GPUs and lavapipe, in the shape vulkaninfo 1.3 prints them.
NVIDIA_AND_CPU = """\
Devices:
========
GPU0:
\tapiVersion         = 1.3.277
\tdeviceType         = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
\tdeviceName         = NVIDIA H200
\tdriverID           = DRIVER_ID_NVIDIA_PROPRIETARY
\tdriverName         = NVIDIA
GPU1:
\tapiVersion         = 1.3.277
\tdeviceType         = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
\tdeviceName         = NVIDIA H200
\tdriverID           = DRIVER_ID_NVIDIA_PROPRIETARY
\tdriverName         = NVIDIA
GPU2:
\tapiVersion         = 1.3.230
\tdeviceType         = PHYSICAL_DEVICE_TYPE_CPU
\tdeviceName         = llvmpipe (LLVM 15.0.6, 256 bits)
\tdriverID           = DRIVER_ID_MESA_LLVMPIPE
\tdriverName         = llvmpipe
"""


def params(**given: Any) -> dict[str, Any]:
    values = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    values.update(given)
    return values


def devices(result: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = result["ansible_facts"]["gpulab_vulkan_devices"]
    return found


def test_lavapipe_is_one_cpu_device_without_device_files() -> None:
    runner = FakeRunner(tools=("vulkaninfo",)).expect(ARGV, stdout=LAVAPIPE)
    result = probe(params(), runner, ["/dev/dri/renderD128"])
    assert [c.argv for c in runner.calls] == [ARGV]
    assert devices(result) == [
        {
            "index": 0,
            "name": "llvmpipe (LLVM 15.0.6, 256 bits)",
            "type": "cpu",
            "driver": "llvmpipe",
            "driver_id": "DRIVER_ID_MESA_LLVMPIPE",
            "driver_info": "Mesa 22.3.6 (LLVM 15.0.6)",
            "api_version": "1.3.230",
            "vendor_id": "0x10005",
            "device_id": "0x0000",
            "device_files": [],
        }
    ]
    assert result["ansible_facts"]["gpulab_vulkan_present"] is True
    assert result["changed"] is False
    assert result["reason"] == ""


def test_nvidia_gpus_take_nvidia_nodes_in_order() -> None:
    runner = FakeRunner(tools=("vulkaninfo",)).expect(ARGV, stdout=NVIDIA_AND_CPU)
    nodes = ["/dev/nvidia1", "/dev/nvidia0", "/dev/nvidiactl"]
    found = devices(probe(params(), runner, nodes))
    assert [(d["name"], d["type"], d["device_files"]) for d in found] == [
        ("NVIDIA H200", "discrete", ["/dev/nvidia0"]),
        ("NVIDIA H200", "discrete", ["/dev/nvidia1"]),
        ("llvmpipe (LLVM 15.0.6, 256 bits)", "cpu", []),
    ]


def test_no_vulkaninfo_is_absent_not_a_failure() -> None:
    runner = FakeRunner(tools=())
    result = probe(params(), runner, [])
    assert runner.calls == []
    assert devices(result) == []
    assert result["ansible_facts"]["gpulab_vulkan_present"] is False
    assert result["reason"] == "vulkaninfo is not installed (package vulkan-tools)"


def test_no_driver_is_absent_with_vulkaninfos_last_line() -> None:
    stderr = "ERROR: [Loader Message] Code 0 : vkCreateInstance: Found no drivers!\n"
    runner = FakeRunner(tools=("vulkaninfo",)).expect(ARGV, rc=1, stderr=stderr)
    result = probe(params(), runner, [])
    assert devices(result) == []
    assert result["reason"] == (
        "vulkaninfo exited 1 (no loader or driver?): "
        "ERROR: [Loader Message] Code 0 : vkCreateInstance: Found no drivers!"
    )


def test_device_nodes_are_named_as_under_dev(tmp_path: Path) -> None:
    (tmp_path / "dri").mkdir()
    for name in ("nvidia0", "nvidiactl", "dri/renderD128", "dri/card0"):
        (tmp_path / name).touch()
    assert sorted(device_nodes(str(tmp_path))) == ["/dev/dri/renderD128", "/dev/nvidia0"]


def test_main_runs_in_check_mode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SlurmRunner, "which", lambda self, name: f"/usr/bin/{name}")
    calls: list[list[str]] = []

    def run(self: SlurmRunner, argv: list[str], **_: Any) -> CommandResult:
        calls.append(list(argv))
        return CommandResult(0, LAVAPIPE, "")

    monkeypatch.setattr(SlurmRunner, "run", run)
    with patch_module_args({"_ansible_check_mode": True}), pytest.raises(SystemExit):
        vulkan_info.main()
    result = json.loads(capsys.readouterr().out)
    assert calls == [ARGV]
    assert result["ansible_facts"]["gpulab_vulkan_devices"][0]["driver"] == "llvmpipe"
