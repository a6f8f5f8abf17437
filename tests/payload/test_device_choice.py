"""Which Vulkan device a run uses inside a Slurm job given GPUs.

The devices are the real lavapipe device's properties with the identity of other GPUs put in
(dataclasses.replace); the driver files are laid out under a temporary root, the NVIDIA one with
the text a real H200 host printed (driver 580, /work/wt/brief/h200/env.txt).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from gpulab.backends.select import resolve
from gpulab.placement.device_choice import DeviceChoice, choose_device, decide
from gpulab.placement.gpu_files import HostFiles, match_file
from gpulab.placement.nvidia_driver import parse_nvidia_information
from gpulab.placement.slurm_gpus import SlurmGpus
from gpulab.vk import DeviceInfo, Instance

from tests.payload.test_cli import gpulab

H200_INFORMATION = (
    "Model: \t\t NVIDIA H200\n"
    "IRQ:   \t\t 41\n"
    "GPU UUID: \t GPU-286a8de3-d1a4-7f52-bb3d-100d5c5aab3f\n"
    "Video BIOS: \t 96.00.a5.00.1a\n"
    "Bus Type: \t PCIe\n"
    "DMA Size: \t 52 bits\n"
    "DMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:00:06.0\n"
    "Device Minor: \t 0\n"
    "GPU Firmware: \t 580.159.04\n"
    "GPU Excluded:\t No\n"
)
H200_UUID = "286a8de3-d1a4-7f52-bb3d-100d5c5aab3f"
NVIDIA = 0x10DE


@pytest.fixture
def lavapipe(instance: Instance) -> DeviceInfo:
    return instance.physical_device(0).info


def gpu(base: DeviceInfo, index: int, **identity: Any) -> DeviceInfo:
    return dataclasses.replace(base, index=index, **identity)


def nvidia_host(root: Path, *gpus: tuple[str, int, str]) -> HostFiles:
    """A host whose driver lists GPUs (PCI address, device minor, UUID) like the H200's."""
    for address, minor, uuid in gpus:
        folder = root / "proc/driver/nvidia/gpus" / address
        folder.mkdir(parents=True)
        text = H200_INFORMATION.replace("0000:00:06.0", address).replace(H200_UUID, uuid)
        (folder / "information").write_text(text.replace("Minor: \t 0", f"Minor: \t {minor}"))
    return HostFiles(root)


def allocation(*files: str, value: str = "0") -> SlurmGpus:
    ids = tuple(range(len(files)))
    return SlurmGpus("SLURM_JOB_GPUS", value, ids, files, "/etc/slurm/gres.conf")


def shard_allocation(*files: str) -> SlurmGpus:
    """A job given one shard, its GPU's files from gres.conf's shard lines (no id)."""
    return SlurmGpus("SLURM_SHARDS_ON_NODE", "1", (), files, "/etc/slurm/gres.conf", shards=1)


def test_the_h200_information_file_parses() -> None:
    fields = parse_nvidia_information(H200_INFORMATION)
    assert fields["GPU UUID"] == f"GPU-{H200_UUID}"
    assert fields["Bus Location"] == "0000:00:06.0"
    assert fields["Device Minor"] == "0"


def test_nvidia_nodes_map_by_gpu_uuid(tmp_path: Path, lavapipe: DeviceInfo) -> None:
    other = "aaaaaaaa-0000-0000-0000-000000000001"
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, H200_UUID), ("0000:00:07.0", 1, other))
    infos = [lavapipe, gpu(lavapipe, 1, uuid=other), gpu(lavapipe, 2, uuid=H200_UUID)]
    h200 = match_file("/dev/nvidia0", infos, host)
    assert (h200.device, h200.how) == (2, f"GPU UUID {H200_UUID}")
    assert match_file("/dev/nvidia1", infos, host).device == 1


def test_nvidia_nodes_map_by_pci_address_when_no_uuid_fits(
    tmp_path: Path, lavapipe: DeviceInfo
) -> None:
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, H200_UUID))
    infos = [lavapipe, gpu(lavapipe, 1, pci_bus="0000:00:06.0")]
    found = match_file("/dev/nvidia0", infos, host)
    assert (found.device, found.how) == (1, "PCI address 0000:00:06.0")


def test_nothing_maps_on_lavapipe_and_each_file_says_why(
    tmp_path: Path, lavapipe: DeviceInfo
) -> None:
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, H200_UUID))
    assert match_file("/dev/nvidia0", [lavapipe], host).how == (
        f"no Vulkan device has GPU UUID {H200_UUID} or PCI address 0000:00:06.0"
    )
    assert match_file("/dev/nvidia3", [lavapipe], host).how == (
        "no /proc/driver/nvidia/gpus/*/information has Device Minor 3"
    )
    assert match_file("/dev/dri/renderD128", [lavapipe], host).device is None
    assert match_file("/dev/nvgpu/igpu0/ctrl", [lavapipe], host).how == (
        "no integrated NVIDIA Vulkan device"
    )
    assert match_file("/dev/fb0", [lavapipe], host).how.startswith("not a GPU node")


def test_a_render_node_maps_by_its_pci_device(tmp_path: Path, lavapipe: DeviceInfo) -> None:
    device = tmp_path / "sys/devices/pci0000:00/0000:03:00.0"
    device.mkdir(parents=True)
    drm = tmp_path / "sys/class/drm/renderD129"
    drm.mkdir(parents=True)
    (drm / "device").symlink_to(device)
    infos = [lavapipe, gpu(lavapipe, 1, pci_bus="0000:03:00.0")]
    found = match_file("/dev/dri/renderD129", infos, HostFiles(tmp_path))
    assert (found.device, found.how) == (1, "PCI address 0000:03:00.0")


def test_a_render_node_maps_by_its_device_number(tmp_path: Path, lavapipe: DeviceInfo) -> None:
    """A link to /dev/null, a real character device, stands in for the render node."""
    null = os.stat("/dev/null").st_rdev
    number = (os.major(null), os.minor(null))
    (tmp_path / "dev/dri").mkdir(parents=True)
    (tmp_path / "dev/dri/renderD128").symlink_to("/dev/null")
    host = HostFiles(tmp_path)
    assert host.char_device("/dev/dri/renderD128") == number
    infos = [lavapipe, gpu(lavapipe, 1, drm_render=number)]
    found = match_file("/dev/dri/renderD128", infos, host)
    assert (found.device, found.how) == (1, f"DRM render node {number[0]}:{number[1]}")
    assert HostFiles().char_device("/etc/hostname") is None


def test_the_host_gpu_nodes_are_listed_in_number_order(tmp_path: Path) -> None:
    for node in ("nvidia10", "nvidia2", "nvidiactl", "nvidia-uvm", "dri/renderD128"):
        (tmp_path / "dev" / node).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "dev" / node).write_text("")
    assert HostFiles(tmp_path).gpu_nodes() == [
        "/dev/dri/renderD128",
        "/dev/nvidia2",
        "/dev/nvidia10",
    ]


def test_tegra_nodes_map_to_the_one_integrated_nvidia_device(lavapipe: DeviceInfo) -> None:
    orin = gpu(lavapipe, 1, type="integrated", vendor_id=NVIDIA, name="NVIDIA Tegra Orin (nvgpu)")
    found = match_file("/dev/nvgpu/igpu0/ctrl", [lavapipe, orin], HostFiles(Path("/nonexistent")))
    assert (found.device, found.how) == (1, "Tegra's integrated GPU")
    assert match_file("/dev/nvhost-ctrl-gpu", [lavapipe, orin], HostFiles()).device == 1


def test_the_allocated_gpu_is_chosen_over_device_0(tmp_path: Path, lavapipe: DeviceInfo) -> None:
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, H200_UUID))
    infos = [lavapipe, gpu(lavapipe, 1, uuid=H200_UUID)]
    choice = decide(None, infos, allocation("/dev/nvidia0"), host)
    assert choice.index == 1
    assert choice.chosen_by == (f"slurm gres /dev/nvidia0 (SLURM_JOB_GPUS=0; GPU UUID {H200_UUID})")
    assert choice.warning is None
    assert choice.slurm_json() == {
        "variable": "SLURM_JOB_GPUS",
        "ids": [0],
        "files": ["/dev/nvidia0"],
        "gres_conf": "/etc/slurm/gres.conf",
        "devices": [{"file": "/dev/nvidia0", "device": 1, "how": f"GPU UUID {H200_UUID}"}],
    }


def test_a_shard_job_uses_the_shared_gpu_and_says_so(tmp_path: Path, lavapipe: DeviceInfo) -> None:
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, H200_UUID))
    infos = [lavapipe, gpu(lavapipe, 1, uuid=H200_UUID)]
    choice = decide(None, infos, shard_allocation("/dev/nvidia0"), host, "12")
    assert choice.index == 1
    assert choice.chosen_by == (
        "slurm shard /dev/nvidia0 (SLURM_SHARDS_ON_NODE=1, a GPU shared with other jobs; "
        f"GPU UUID {H200_UUID})"
    )
    assert choice.slurm_json() == {
        "variable": "SLURM_SHARDS_ON_NODE",
        "ids": [],
        "files": ["/dev/nvidia0"],
        "gres_conf": "/etc/slurm/gres.conf",
        "shards": 1,
        "devices": [{"file": "/dev/nvidia0", "device": 1, "how": f"GPU UUID {H200_UUID}"}],
    }
    reason = resolve("auto", choice)[1]
    assert reason == f"auto chose vulkan: device 1 is {lavapipe.name}; {choice.chosen_by}"


def test_of_several_shard_gpus_the_one_the_job_can_open_is_chosen(
    tmp_path: Path, lavapipe: DeviceInfo
) -> None:
    """Under ConstrainDevices the driver lists only the job's GPU (here the second): the other
    shard file maps to no Vulkan device."""
    other = "aaaaaaaa-0000-0000-0000-000000000001"
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, other), ("0000:00:07.0", 1, H200_UUID))
    infos = [lavapipe, gpu(lavapipe, 1, uuid=H200_UUID)]
    choice = decide(None, infos, shard_allocation("/dev/nvidia0", "/dev/nvidia1"), host)
    assert (choice.index, [m.device for m in choice.matches]) == (1, [None, 1])
    assert choice.chosen_by.startswith("slurm shard /dev/nvidia1 (SLURM_SHARDS_ON_NODE=1, ")
    unmapped = decide(None, [lavapipe], shard_allocation("/dev/nvidia0"), host)
    assert unmapped.index == 0
    assert unmapped.chosen_by == (
        "default: the shards' GPU (SLURM_SHARDS_ON_NODE=1, a GPU shared with other jobs) maps "
        f"to no Vulkan device here (/dev/nvidia0: no Vulkan device has GPU UUID {other} or PCI "
        "address 0000:00:06.0)"
    )


def test_a_job_with_gpu_ids_and_shards_names_both(tmp_path: Path, lavapipe: DeviceInfo) -> None:
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, H200_UUID))
    infos = [lavapipe, gpu(lavapipe, 1, uuid=H200_UUID)]
    ids = dataclasses.replace(allocation("/dev/nvidia0"), shards=2)
    assert decide(None, infos, ids, host).chosen_by == (
        "slurm shard /dev/nvidia0 (SLURM_SHARDS_ON_NODE=2, a GPU shared with other jobs, "
        f"SLURM_JOB_GPUS=0; GPU UUID {H200_UUID})"
    )


def test_auto_in_a_slurm_job_given_no_gpu_says_how_to_ask_for_one() -> None:
    in_job = DeviceChoice(0, "default (no GPUs allocated by Slurm)", (), slurm_job="12")
    assert resolve("auto", in_job) == (
        "cpu",
        "auto chose cpu: no Vulkan device was found (Slurm job 12 was given no GPU: ask with "
        "--gres=gpu:1 or gpulab submit --gpus 1)",
    )
    outside = dataclasses.replace(in_job, slurm_job=None)
    assert resolve("auto", outside) == ("cpu", "auto chose cpu: no Vulkan device was found")
    # A job given a GPU (or a shard) that Vulkan cannot see needs another hint than asking.
    sharing = dataclasses.replace(in_job, allocation=shard_allocation("/dev/nvidia0"))
    assert resolve("auto", sharing)[1] == "auto chose cpu: no Vulkan device was found"


def test_choose_device_knows_the_slurm_job() -> None:
    assert choose_device(None, {"SLURM_JOB_ID": "12"}).slurm_job == "12"
    assert choose_device(None, {}).slurm_job is None


def test_an_explicit_device_wins_but_outside_the_allocation_it_warns(
    tmp_path: Path, lavapipe: DeviceInfo
) -> None:
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, H200_UUID))
    infos = [lavapipe, gpu(lavapipe, 1, uuid=H200_UUID)]
    outside = decide(0, infos, allocation("/dev/nvidia0"), host)
    assert (outside.index, outside.chosen_by) == (0, "--device 0")
    assert outside.warning == (
        "--device 0 is not a GPU Slurm allocated to this job (SLURM_JOB_GPUS=0 is Vulkan device 1)"
    )
    inside = decide(1, infos, allocation("/dev/nvidia0"), host)
    assert (inside.index, inside.warning) == (1, None)
    assert decide(0, infos, None, host).warning is None


def test_without_an_allocation_or_a_mapping_device_0_stays_and_says_why(
    tmp_path: Path, lavapipe: DeviceInfo
) -> None:
    host = nvidia_host(tmp_path, ("0000:00:06.0", 0, H200_UUID))
    plain = decide(None, [lavapipe], None, host)
    assert (plain.index, plain.chosen_by) == (0, "default (no GPUs allocated by Slurm)")
    assert plain.slurm_json() is None
    unmapped = decide(None, [lavapipe], allocation("/dev/nvidia0"), host)
    assert unmapped.index == 0
    assert unmapped.chosen_by == (
        "default: SLURM_JOB_GPUS=0 maps to no Vulkan device here (/dev/nvidia0: no Vulkan "
        f"device has GPU UUID {H200_UUID} or PCI address 0000:00:06.0)"
    )


def test_lavapipe_reports_a_uuid_and_no_bus(lavapipe: DeviceInfo) -> None:
    assert len(lavapipe.uuid) == 36
    assert lavapipe.uuid.count("-") == 4
    assert (lavapipe.pci_bus, lavapipe.drm_render) == (None, None)
    assert lavapipe.to_dict().keys() >= {"uuid", "pci_bus", "drm_render"}


def slurm_job(tmp_path: Path, gres_conf: str, **variables: str) -> dict[str, str]:
    """This process's environment plus a Slurm job's, with gres.conf beside SLURM_CONF."""
    (tmp_path / "slurm.conf").write_text("ClusterName=gpulab\n")
    (tmp_path / "gres.conf").write_text(gres_conf)
    env = dict(os.environ, SLURM_JOB_ID="42", SLURMD_NODENAME="worker1")
    return env | {"SLURM_CONF": str(tmp_path / "slurm.conf")} | variables


def test_choose_device_reads_the_job_and_the_real_devices(tmp_path: Path) -> None:
    env = slurm_job(tmp_path, "NodeName=worker1 Name=gpu Type=h200 File=/dev/nvidia0\n")
    choice = choose_device(None, env | {"SLURM_JOB_GPUS": "0"}, HostFiles(tmp_path))
    assert choice.index == 0
    assert choice.infos
    assert choice.chosen_by.startswith("default: SLURM_JOB_GPUS=0 maps to no Vulkan device here")


def one_sum_graph(tmp_path: Path) -> Path:
    graph = tmp_path / "g.json"
    graph.write_text(
        json.dumps(
            {
                "version": 1,
                "name": "one-sum",
                "inputs": {"x": {"type": "vector", "data": [1.0, 2.0]}},
                "nodes": [{"id": "s", "op": "sum", "inputs": {"x": "x"}}],
                "outputs": ["s"],
            }
        )
    )
    return graph


def test_a_run_in_a_job_whose_gpu_maps_to_nothing_stays_on_device_0_and_says_why(
    tmp_path: Path,
) -> None:
    """On lavapipe (the real device here) a gres.conf naming /dev/nvidia0 maps to nothing."""
    graph = one_sum_graph(tmp_path)
    gres = "NodeName=worker1 Name=gpu Type=h200 File=/dev/nvidia0\n"
    env = slurm_job(tmp_path, gres, SLURM_JOB_GPUS="0")
    done = gpulab("run", str(graph), "--backend", "vulkan", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["device"]["index"] == 0
    chosen_by = result["device"]["chosen_by"]
    assert chosen_by.startswith("default: SLURM_JOB_GPUS=0 maps to no Vulkan device here (")
    assert "/dev/nvidia0: " in chosen_by
    gpus = result["slurm"]["gpus"]
    assert (gpus["ids"], gpus["files"]) == ([0], ["/dev/nvidia0"])
    assert [d["device"] for d in gpus["devices"]] == [None]
    explicit = gpulab("run", str(graph), "--device", "0", env=env)
    assert explicit.returncode == 0, explicit.stderr
    assert json.loads(explicit.stdout)["device"]["chosen_by"] == "--device 0"
    assert "not a GPU Slurm allocated" not in explicit.stderr  # nothing maps: no claim


def test_a_run_in_a_shard_job_records_its_shards(tmp_path: Path) -> None:
    """No Vulkan device here has the H100's identity: the run stays on device 0 and says why."""
    gres = (
        "NodeName=worker1 Name=gpu Type=h100 File=/dev/nvidia0\n"
        "NodeName=worker1 Name=shard Count=4 File=/dev/nvidia0\n"
    )
    env = slurm_job(tmp_path, gres, SLURM_SHARDS_ON_NODE="1", CUDA_VISIBLE_DEVICES="0")
    done = gpulab("run", str(one_sum_graph(tmp_path)), "--backend", "vulkan", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["device"]["chosen_by"].startswith(
        "default: the shards' GPU (SLURM_SHARDS_ON_NODE=1, a GPU shared with other jobs) maps to "
        "no Vulkan device here (/dev/nvidia0: "
    )
    gpus = result["slurm"]["gpus"]
    assert (gpus["variable"], gpus["files"], gpus["shards"]) == (
        "SLURM_SHARDS_ON_NODE",
        ["/dev/nvidia0"],
        1,
    )


def test_selftest_and_devices_say_how_each_device_was_chosen(tmp_path: Path) -> None:
    env = slurm_job(tmp_path, "Name=gpu File=/dev/nvidia0\n", SLURM_STEP_GPUS="0")
    done = gpulab("selftest", "--backend", "vulkan", "--json", env=env)
    assert done.returncode == 0, done.stderr
    devices = json.loads(done.stdout)["devices"]
    assert devices
    assert all(d["chosen_by"].startswith("default: SLURM_STEP_GPUS=0") for d in devices)
    listing = gpulab("devices", "--json")
    assert listing.returncode == 0, listing.stderr
    for device in json.loads(listing.stdout):
        assert device.keys() >= {"uuid", "pci_bus", "gpu_files"}
