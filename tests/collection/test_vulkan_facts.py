"""gpulab.cluster.vulkan_facts: the commands it runs, how it reads vulkaninfo, the device files
and features it gives each device, and absence; that it is a facts module as Ansible names
them, and that its first name, gpulab.cluster.vulkan_info, still runs it (meta/runtime.yml)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import (
    CommandResult,
    SlurmRunner,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.vulkan_devices import (
    api_version,
    gres_type,
)
from ansible_collections.gpulab.cluster.plugins.modules import vulkan_facts
from ansible_collections.gpulab.cluster.plugins.modules.vulkan_facts import (
    ARGUMENT_SPEC,
    device_nodes,
    probe,
)

from tests.roles.playbook import run_playbook

from .fakes import FakeRunner

FIXTURES = Path(__file__).parent / "fixtures"
# Captured on the development machine (Debian 12, mesa 22.3.6, vulkan-tools 1.3.239):
# `vulkaninfo --summary` and `vulkaninfo` (stdout).
LAVAPIPE = (FIXTURES / "vulkaninfo-summary-lavapipe.txt").read_text()
LAVAPIPE_FULL = (FIXTURES / "vulkaninfo-lavapipe.txt").read_text()
# Captured on the device tool's H200 host (Ubuntu 24.04, driver 580): one H200.
H200 = (FIXTURES / "vulkaninfo-summary-h200.txt").read_text()
H200_FULL = (FIXTURES / "vulkaninfo-h200.txt").read_text()
# Reconstructed (the files' headers say from what): two H200s.
H200X2 = (FIXTURES / "vulkaninfo-summary-h200x2.txt").read_text()
H200X2_FULL = (FIXTURES / "vulkaninfo-h200x2.txt").read_text()
# The Orin: the lab's Jetson stand-in recording (its header says what is captured and what
# reconstructed), so the unit tests and molecule read the same Orin.
ORIN_RECORDING = Path(__file__).parents[2] / "lab/standin/jetson/vulkaninfo"
ORIN = subprocess.run(
    [ORIN_RECORDING, "--summary"], capture_output=True, text=True, check=True
).stdout
ORIN_FULL = subprocess.run([ORIN_RECORDING], capture_output=True, text=True, check=True).stdout
SUMMARY = ["/usr/bin/vulkaninfo", "--summary"]
FULL = ["/usr/bin/vulkaninfo"]

NVIDIA_NODES = [
    "/dev/nvidia1", "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
]  # fmt: skip
# What L4T r36 (JetPack 6) creates for the Orin's GPU; the render node is tegra-drm's.
ORIN_NODES = [
    "/dev/nvmap", "/dev/nvhost-ctrl-gpu", "/dev/nvhost-gpu", "/dev/nvhost-as-gpu",
    "/dev/nvhost-tsg-gpu", "/dev/nvgpu/igpu0/ctrl", "/dev/nvgpu/igpu0/as",
    "/dev/nvgpu/igpu0/channel", "/dev/nvgpu/igpu0/tsg", "/dev/dri/renderD128",
]  # fmt: skip

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

# Two AMD GPUs on Mesa's radv: the second one's VK_EXT_physical_device_drm names its node.
RADV = """\
Devices:
========
GPU0:
\tapiVersion         = 1.3.255
\tdeviceType         = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
\tdeviceName         = AMD Radeon RX 7900 XTX (RADV NAVI31)
\tdriverID           = DRIVER_ID_MESA_RADV
GPU1:
\tapiVersion         = 1.3.255
\tdeviceType         = PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU
\tdeviceName         = AMD Radeon Graphics (RADV RAPHAEL_MENDOCINO)
\tdriverID           = DRIVER_ID_MESA_RADV
"""
RADV_FULL = """\
Device Properties and Extensions:
=================================
GPU0:
\tsubgroupSize = 64
GPU1:
VkPhysicalDeviceDrmPropertiesEXT:
\thasPrimary   = true
\thasRender    = true
\tprimaryMinor = 0
\trenderMinor  = 128
"""


def params(**given: Any) -> dict[str, Any]:
    values = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    values.update(given)
    return values


def devices(result: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = result["ansible_facts"]["gpulab_vulkan_devices"]
    return found


def vulkaninfo(summary: str, full: str, full_rc: int = 0) -> FakeRunner:
    """A runner answering the module's two vulkaninfo runs."""
    runner = FakeRunner(tools=("vulkaninfo",)).expect(SUMMARY, stdout=summary)
    return runner.expect(FULL, rc=full_rc, stdout=full)


def test_lavapipe_is_one_cpu_device_with_features_and_no_device_files() -> None:
    runner = vulkaninfo(LAVAPIPE, LAVAPIPE_FULL)
    result = probe(params(), runner, ["/dev/dri/renderD128"], tegra=False)
    assert [c.argv for c in runner.calls] == [SUMMARY, FULL]
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
            "uuid": "6d657361-3232-2e33-2e36-000000000000",
            "device_files": [],
            "gres_file": None,
            "gres_type": "llvmpipe",
            "features": ["fp64", "llvmpipe", "subgroup8", "vulkan1.3"],
        }
    ]
    assert result["ansible_facts"]["gpulab_vulkan_present"] is True
    assert result["ansible_facts"]["gpulab_tegra"] is False
    assert result["changed"] is False
    assert result["reason"] == ""
    assert result["warnings"] == []


def test_a_real_h200_capture_gives_its_node_features_and_the_drivers_nodes() -> None:
    # The device nodes that host has: no /dev/dri, no nvidia-modeset.
    nodes = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    [h200] = devices(probe(params(), vulkaninfo(H200, H200_FULL), nodes, tegra=False))
    assert (h200["name"], h200["type"], h200["driver_id"], h200["api_version"]) == (
        "NVIDIA H200", "discrete", "DRIVER_ID_NVIDIA_PROPRIETARY", "1.4.312"
    )  # fmt: skip
    assert h200["gres_file"] == "/dev/nvidia0"
    assert h200["gres_type"] == "h200"
    assert h200["device_files"] == nodes
    assert h200["features"] == ["fp64", "h200", "subgroup32", "vulkan1.4"]


def test_two_h200s_take_their_own_node_and_the_drivers_shared_ones() -> None:
    result = probe(params(), vulkaninfo(H200X2, H200X2_FULL), NVIDIA_NODES, tegra=False)
    shared = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]
    assert [
        (d["name"], d["type"], d["api_version"], d["gres_file"], d["gres_type"], d["features"])
        for d in devices(result)
    ] == [
        ("NVIDIA H200", "discrete", "1.4.312", f"/dev/nvidia{n}", "h200",
         ["fp64", "h200", "subgroup32", "vulkan1.4"])
        for n in (0, 1)
    ]  # fmt: skip
    assert [d["device_files"] for d in devices(result)] == [
        ["/dev/nvidia0", *shared],
        ["/dev/nvidia1", *shared],
    ]


def test_shared_nvidia_nodes_are_only_those_present() -> None:
    nodes = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    found = devices(probe(params(), vulkaninfo(H200X2, H200X2_FULL), nodes, tegra=False))
    assert [d["device_files"] for d in found] == [
        ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"],
        [],
    ]
    assert [d["gres_file"] for d in found] == ["/dev/nvidia0", None]


def nvidia_information(root: Path, minor: int, uuid: str) -> None:
    """A /proc/driver/nvidia/gpus/<pci>/information file as driver 580 writes it."""
    gpu = root / f"0000:00:0{6 + minor}.0"
    gpu.mkdir(parents=True)
    (gpu / "information").write_text(
        f"Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-{uuid}\nDevice Minor: \t {minor}\n"
    )


def test_nvidia_gpus_take_the_node_of_their_gpu_uuid(tmp_path: Path) -> None:
    # The driver numbers the GPUs the other way round from the loader: the UUIDs decide,
    # as they do when the payload picks the GPU Slurm allocated.
    nvidia_information(tmp_path, 0, "5d7e2a91-0c3f-4b68-a2d4-7e9f1b3c6a05")
    nvidia_information(tmp_path, 1, "3a1f0c52-8e4b-7d21-9c6e-0b5d2f7a4e13")
    given = params(nvidia_gpus_dir=str(tmp_path))
    found = devices(probe(given, vulkaninfo(H200X2, H200X2_FULL), NVIDIA_NODES, tegra=False))
    assert [(d["uuid"], d["gres_file"]) for d in found] == [
        ("3a1f0c52-8e4b-7d21-9c6e-0b5d2f7a4e13", "/dev/nvidia1"),
        ("5d7e2a91-0c3f-4b68-a2d4-7e9f1b3c6a05", "/dev/nvidia0"),
    ]


def test_without_the_drivers_information_nvidia_gpus_take_nodes_in_order(tmp_path: Path) -> None:
    given = params(nvidia_gpus_dir=str(tmp_path / "absent"))
    found = devices(probe(given, vulkaninfo(H200X2, H200X2_FULL), NVIDIA_NODES, tegra=False))
    assert [d["gres_file"] for d in found] == ["/dev/nvidia0", "/dev/nvidia1"]


def test_nvidia_gpus_and_lavapipe_in_order() -> None:
    runner = vulkaninfo(NVIDIA_AND_CPU, "")
    found = devices(probe(params(), runner, ["/dev/nvidia1", "/dev/nvidia0"], tegra=False))
    assert [(d["name"], d["type"], d["device_files"], d["gres_type"]) for d in found] == [
        ("NVIDIA H200", "discrete", ["/dev/nvidia0"], "h200"),
        ("NVIDIA H200", "discrete", ["/dev/nvidia1"], "h200"),
        ("llvmpipe (LLVM 15.0.6, 256 bits)", "cpu", [], "llvmpipe"),
    ]
    # An empty full text gives no subgroup or fp64 words, and nothing is invented.
    assert [d["features"] for d in found] == [["h200", "vulkan1.3"]] * 2 + [
        ["llvmpipe", "vulkan1.3"]
    ]


def test_jetpack6_orin_takes_the_tegra_nodes_with_nvgpu_ctrl_for_gres() -> None:
    runner = vulkaninfo(ORIN, ORIN_FULL)
    result = probe(params(), runner, ORIN_NODES, tegra=True)
    [orin] = devices(result)
    assert orin["name"] == "NVIDIA Tegra Orin (nvgpu)"
    assert orin["type"] == "integrated"
    assert orin["api_version"] == "1.3.251"
    assert orin["gres_file"] == "/dev/nvgpu/igpu0/ctrl"
    assert orin["device_files"] == [
        "/dev/nvgpu/igpu0/ctrl", "/dev/nvmap", "/dev/nvgpu/igpu0/as", "/dev/nvgpu/igpu0/channel",
        "/dev/nvgpu/igpu0/tsg", "/dev/nvhost-as-gpu", "/dev/nvhost-ctrl-gpu", "/dev/nvhost-gpu",
        "/dev/nvhost-tsg-gpu",
    ]  # fmt: skip
    assert orin["gres_type"] == "orin"
    assert orin["features"] == ["fp64", "orin", "subgroup32", "vulkan1.3"]
    assert result["ansible_facts"]["gpulab_tegra"] is True


def test_orin_before_r36_stands_for_itself_with_nvhost_ctrl_gpu() -> None:
    nodes = [n for n in ORIN_NODES if not n.startswith("/dev/nvgpu/")]
    [orin] = devices(probe(params(), vulkaninfo(ORIN, ORIN_FULL), nodes, tegra=True))
    assert orin["gres_file"] == "/dev/nvhost-ctrl-gpu"
    assert orin["device_files"][:2] == ["/dev/nvhost-ctrl-gpu", "/dev/nvmap"]


def test_tegra_host_without_gpu_nodes_has_no_gres_file() -> None:
    [orin] = devices(probe(params(), vulkaninfo(ORIN, ORIN_FULL), ["/dev/nvmap"], tegra=True))
    assert (orin["device_files"], orin["gres_file"]) == ([], None)


def test_mesa_gpus_take_the_render_node_their_drm_properties_name() -> None:
    nodes = ["/dev/dri/renderD128", "/dev/dri/renderD129"]
    found = devices(probe(params(), vulkaninfo(RADV, RADV_FULL), nodes, tegra=False))
    # GPU1 names renderD128; GPU0 says nothing and takes the next one left, in order.
    assert [(d["gres_type"], d["gres_file"], d["device_files"]) for d in found] == [
        ("rx_7900_xtx", "/dev/dri/renderD129", ["/dev/dri/renderD129"]),
        ("raphael_mendocino", "/dev/dri/renderD128", ["/dev/dri/renderD128"]),
    ]
    assert found[0]["features"] == ["rx_7900_xtx", "subgroup64", "vulkan1.3"]


def test_failing_full_text_keeps_the_devices_and_warns() -> None:
    runner = vulkaninfo(LAVAPIPE, "", full_rc=139)
    result = probe(params(), runner, [], tegra=False)
    assert devices(result)[0]["features"] == ["llvmpipe", "vulkan1.3"]
    assert result["reason"] == ""
    assert result["warnings"] == [
        "vulkaninfo (full text) exited 139: no subgroup or fp64 features: "
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA H100 NVL", "h100_nvl"),
        ("NVIDIA GeForce RTX 4090", "rtx_4090"),
        ("NVIDIA Tegra Orin (nvgpu)", "orin"),
        ("llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe"),
        ("Intel(R) UHD Graphics 620", "uhd_620"),
        ("AMD Radeon Graphics (RADV RAPHAEL_MENDOCINO)", "raphael_mendocino"),
        ("AMD Radeon RX 7900 XTX (RADV NAVI31)", "rx_7900_xtx"),
        ("Some Graphics", "some"),
        ("(NVIDIA)", "gpu"),
    ],
)
def test_gres_type_is_the_model_in_the_name(name: str, expected: str) -> None:
    assert gres_type(name) == expected


@pytest.mark.parametrize(
    ("printed", "version"),
    [("1.3.230", "1.3.230"), ("1.3.230 (4206822)", "1.3.230"), ("4206797 (1.3.205)", "1.3.205")],
)
def test_api_version_is_the_dotted_one_in_either_order(printed: str, version: str) -> None:
    assert api_version(printed) == version


def test_no_vulkaninfo_is_absent_not_a_failure() -> None:
    runner = FakeRunner(tools=())
    result = probe(params(), runner, [], tegra=False)
    assert runner.calls == []
    assert devices(result) == []
    assert result["ansible_facts"]["gpulab_vulkan_present"] is False
    assert result["reason"] == "vulkaninfo is not installed (package vulkan-tools)"


def test_no_driver_is_absent_with_vulkaninfos_last_line() -> None:
    stderr = "ERROR: [Loader Message] Code 0 : vkCreateInstance: Found no drivers!\n"
    runner = FakeRunner(tools=("vulkaninfo",)).expect(SUMMARY, rc=1, stderr=stderr)
    result = probe(params(), runner, [], tegra=False)
    assert [c.argv for c in runner.calls] == [SUMMARY]
    assert devices(result) == []
    assert result["reason"] == (
        "vulkaninfo exited 1 (no loader or driver?): "
        "ERROR: [Loader Message] Code 0 : vkCreateInstance: Found no drivers!"
    )


def test_device_nodes_are_named_as_under_dev(tmp_path: Path) -> None:
    for directory in ("dri", "nvidia-caps", "nvgpu/igpu0"):
        (tmp_path / directory).mkdir(parents=True)
    for name in (
        "nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-caps/nvidia-cap1", "dri/renderD128",
        "dri/card0", "nvmap", "nvhost-gpu", "nvhost-ctrl-gpu", "nvgpu/igpu0/ctrl", "null",
    ):  # fmt: skip
        (tmp_path / name).touch()
    assert sorted(device_nodes(str(tmp_path))) == [
        "/dev/dri/renderD128", "/dev/nvgpu/igpu0/ctrl", "/dev/nvhost-ctrl-gpu", "/dev/nvhost-gpu",
        "/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvmap",
    ]  # fmt: skip


def test_main_runs_in_check_mode_and_reads_the_tegra_mark(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(SlurmRunner, "which", lambda self, name: f"/usr/bin/{name}")
    calls: list[list[str]] = []

    def run(self: SlurmRunner, argv: list[str], **_: Any) -> CommandResult:
        calls.append(list(argv))
        return CommandResult(tuple(argv), 0, ORIN if argv[1:] == ["--summary"] else ORIN_FULL, "")

    monkeypatch.setattr(SlurmRunner, "run", run)
    release = tmp_path / "nv_tegra_release"
    release.write_text("# R36 (release), REVISION: 4.3\n")
    args = {"_ansible_check_mode": True, "tegra_release": str(release), "dev_dir": str(tmp_path)}
    with patch_module_args(args), pytest.raises(SystemExit):
        vulkan_facts.main()
    result = json.loads(capsys.readouterr().out)
    assert calls == [SUMMARY, FULL]
    assert result["ansible_facts"]["gpulab_tegra"] is True
    [orin] = result["ansible_facts"]["gpulab_vulkan_devices"]
    assert (orin["gres_type"], orin["gres_file"]) == ("orin", None)


def test_one_gpu_listed_twice_is_one_device_file_and_a_warning() -> None:
    # Seen on the device machine's H100: NVIDIA's ICD manifest in two of the loader's folders,
    # so vulkaninfo listed the GPU as GPU0 and GPU1 (scripts/gpu-host/slurm.sh's first runs).
    gpu = H200[H200.index("GPU0:") :]
    twice = H200 + "\n" + gpu.replace("GPU0:", "GPU1:", 1)
    found = devices(probe(params(), vulkaninfo(twice, ""), NVIDIA_NODES, tegra=False))
    assert [(d["index"], d["gres_file"]) for d in found] == [
        (0, "/dev/nvidia0"),
        (1, "/dev/nvidia0"),
    ]
    result = probe(params(), vulkaninfo(twice, ""), NVIDIA_NODES, tegra=False)
    uuid = found[0]["uuid"]
    assert result["warnings"] == [
        f"Vulkan lists one GPU (UUID {uuid}) as devices 0, 1: two ICD manifests name its driver "
        "(look in /etc/vulkan/icd.d, /usr/share/vulkan/icd.d and $XDG_DATA_DIRS); remove the copy"
    ]


# A facts module by Ansible's naming (`_facts` returns ansible_facts, `_info` returns data), whose
# first name keeps working: the contract's gpulab.cluster.vulkan_info.

COLLECTION = Path(__file__).parents[2] / "collections/ansible_collections/gpulab/cluster"


def test_it_is_documented_as_a_facts_module_that_runs_in_check_mode() -> None:
    documentation = yaml.safe_load(vulkan_facts.DOCUMENTATION)
    assert documentation["module"] == "vulkan_facts"
    attributes = {name: entry["support"] for name, entry in documentation["attributes"].items()}
    assert attributes == {"check_mode": "full", "diff_mode": "N/A", "facts": "full"}
    returned = yaml.safe_load(vulkan_facts.RETURN)
    assert set(returned["ansible_facts"]["contains"]) == {
        "gpulab_vulkan_devices",
        "gpulab_vulkan_present",
        "gpulab_tegra",
    }
    assert "gpulab.cluster.vulkan_facts:" in vulkan_facts.EXAMPLES


def test_the_first_name_is_redirected_for_good() -> None:
    """A redirect with no deprecation and no tombstone: the name never stops working."""
    runtime = yaml.safe_load((COLLECTION / "meta/runtime.yml").read_text())
    assert runtime["plugin_routing"] == {
        "modules": {"vulkan_info": {"redirect": "gpulab.cluster.vulkan_facts"}}
    }


RECORDED = """#!/bin/sh
if [ "$1" = --summary ]; then cat {summary}; else cat {full}; fi
"""
"""A vulkaninfo that prints the lavapipe recordings."""


def test_both_names_run_the_module_in_a_play_without_a_deprecation(tmp_path: Path) -> None:
    """ansible-playbook on this machine with the repository's collection: the old name and the
    new gather the same facts, in check mode too, and nothing is deprecated."""
    vulkaninfo = tmp_path / "vulkaninfo"
    vulkaninfo.write_text(
        RECORDED.format(
            summary=FIXTURES / "vulkaninfo-summary-lavapipe.txt",
            full=FIXTURES / "vulkaninfo-lavapipe.txt",
        )
    )
    vulkaninfo.chmod(0o755)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "hosts.json").write_text(json.dumps({"all": {"hosts": {"node": local}}}))
    tasks = [
        {"name": name, module: {"vulkaninfo": str(vulkaninfo), "dev_dir": str(tmp_path)},
         "check_mode": True}
        for name, module in (("old name", "gpulab.cluster.vulkan_info"),
                             ("new name", "gpulab.cluster.vulkan_facts"))
    ]  # fmt: skip
    tasks.append({"name": "facts", "ansible.builtin.assert": {
        "that": ["ansible_facts.gpulab_vulkan_devices | map(attribute='driver') | list"
                 " == ['llvmpipe']"]}})  # fmt: skip
    play = [{"name": "Vulkan facts by both names", "hosts": "all", "gather_facts": False,
             "tasks": tasks}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    report = run_playbook(tmp_path)
    results = {task["task"]["name"]: task["hosts"]["node"] for task in report["plays"][0]["tasks"]}
    old, new = results["old name"], results["new name"]
    assert old["ansible_facts"] == new["ansible_facts"]
    assert old["ansible_facts"]["gpulab_vulkan_present"] is True
    assert (old["changed"], new["changed"]) == (False, False)
    assert "deprecations" not in json.dumps(report)


def test_ansible_doc_shows_the_facts_module_for_the_first_name() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_CONFIG"] = str(COLLECTION.parents[3] / "ansible.cfg")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-doc")), "-j", "gpulab.cluster.vulkan_info"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    [(name, entry)] = json.loads(done.stdout).items()
    assert name == "gpulab.cluster.vulkan_info"
    assert entry["doc"]["module"] == "vulkan_facts"
    assert entry["doc"]["filename"].endswith("plugins/modules/vulkan_facts.py")
