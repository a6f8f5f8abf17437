"""Which device file is which GPU, decided once: module_utils/gpu_files.py, which vulkan_facts
(through vulkan_devices) and the payload (gpulab.placement.gpu_files, a link to it) both use.
Each case here is asked of both sides: the file the collection writes into gres.conf for a
GPU is the file the payload maps back to that GPU inside a job."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from ansible_collections.gpulab.cluster.plugins.module_utils import gpu_files, vulkan_devices
from ansible_collections.gpulab.cluster.plugins.module_utils.gpu_files import (
    TEGRA_GPU_FILES,
    HostFiles,
    ListedFiles,
    files_by_device,
    match_file,
    tegra_files,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.vulkan_devices import (
    Identity,
    assign_device_files,
    parse_summary,
)

from tests.in_repo_collection import REPO

NVIDIA = 0x10DE
ORIN_SUMMARY = """\
Devices:
========
GPU0:
\tdeviceType         = PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU
\tdeviceName         = NVIDIA Tegra Orin (nvgpu)
\tdriverID           = DRIVER_ID_NVIDIA_PROPRIETARY
\tvendorID           = 0x10de
\tdeviceUUID         = 0f0f0f0f-0000-0000-0000-000000000001
GPU1:
\tdeviceType         = PHYSICAL_DEVICE_TYPE_CPU
\tdeviceName         = llvmpipe (LLVM 15.0.6, 256 bits)
\tdriverID           = DRIVER_ID_MESA_LLVMPIPE
\tvendorID           = 0x10005
"""
ORIN = Identity(0, "integrated", NVIDIA, "0f0f0f0f-0000-0000-0000-000000000001", None, None)
LAVAPIPE = Identity(1, "cpu", 0x10005, "", None, None)


def host_with(root: Path, *nodes: str) -> HostFiles:
    """A host whose /dev has these (empty) files."""
    for node in nodes:
        path = root / node.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return HostFiles(root)


def collection_gres_file(nodes: list[str]) -> str | None:
    """The gres.conf File= vulkan_facts gives the Orin of ORIN_SUMMARY on a Tegra host."""
    devices = parse_summary(ORIN_SUMMARY)
    assign_device_files(devices, nodes, True, {})
    gres_file: str | None = devices[0]["gres_file"]
    return gres_file


def test_the_tegra_list_is_the_three_names_of_the_gpus_own_node() -> None:
    assert TEGRA_GPU_FILES == (
        "/dev/nvgpu/igpu0/ctrl",  # L4T r36 (JetPack 6)
        "/dev/nvhost-ctrl-gpu",  # older releases
        "/dev/nvhost-gpu",
    )


@pytest.mark.parametrize("own", TEGRA_GPU_FILES)
def test_each_tegra_name_is_the_gres_file_and_maps_back_to_the_orin(
    own: str, tmp_path: Path
) -> None:
    """Either side alone once decided this with its own list (the payload's had two names)."""
    assert collection_gres_file(["/dev/nvmap", own]) == own
    host = host_with(tmp_path, "/dev/nvmap", own)
    assert host.gpu_nodes() == [own]
    assert files_by_device([LAVAPIPE, ORIN], host) == {0: [own]}
    assert match_file(own, [LAVAPIPE, ORIN], host).how == "Tegra's integrated GPU"


def test_an_orin_with_only_nvhost_gpu_is_one_gpu_to_both_sides(tmp_path: Path) -> None:
    """Where the two used to disagree: the collection wrote File=/dev/nvhost-gpu into gres.conf
    (its list had three names), while the payload's host listing knew two and gave the Orin no
    device file (`gpulab devices` showed no gpu_files for it)."""
    nodes = ["/dev/nvmap", "/dev/nvhost-gpu", "/dev/nvhost-as-gpu"]
    assert collection_gres_file(nodes) == "/dev/nvhost-gpu"
    assert files_by_device([ORIN], host_with(tmp_path, *nodes)) == {0: ["/dev/nvhost-gpu"]}


def test_the_first_present_tegra_name_wins_on_both_sides(tmp_path: Path) -> None:
    nodes = ["/dev/nvmap", *reversed(TEGRA_GPU_FILES)]
    assert collection_gres_file(nodes) == "/dev/nvgpu/igpu0/ctrl"
    assert host_with(tmp_path, *nodes).gpu_nodes() == ["/dev/nvgpu/igpu0/ctrl"]
    assert tegra_files(nodes) == [
        "/dev/nvgpu/igpu0/ctrl", "/dev/nvmap", "/dev/nvhost-ctrl-gpu", "/dev/nvhost-gpu",
    ]  # fmt: skip


def test_a_render_node_named_by_the_driver_maps_the_same_on_both_sides(tmp_path: Path) -> None:
    """The collection reads the render node from its name; the payload from the file's device
    number, which for /dev/dri/renderDN is 226:N."""
    radv = Identity(0, "discrete", 0x1002, "", None, (226, 129))
    listed = match_file("/dev/dri/renderD129", [radv], ListedFiles({}))
    assert (listed.device, listed.how) == (0, "DRM render node 226:129")
    assert match_file("/dev/dri/renderD128", [radv], ListedFiles({})).device is None


def test_an_nvidia_node_maps_by_the_uuid_the_driver_gives_its_minor() -> None:
    uuid = "286a8de3-d1a4-7f52-bb3d-100d5c5aab3f"
    h200 = Identity(0, "discrete", NVIDIA, uuid, None, None)
    driver = ListedFiles({3: {"GPU UUID": f"GPU-{uuid}", "Device Minor": "3"}})
    assert match_file("/dev/nvidia3", [h200], driver).how == f"GPU UUID {uuid}"
    assert match_file("/dev/nvidia0", [h200], driver).device is None


def code_strings(path: Path) -> list[str]:
    """The string literals of a Python source that are code: not docstrings, not an Ansible
    module's DOCUMENTATION, EXAMPLES or RETURN."""
    tree = ast.parse(path.read_text())
    prose = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            prose.add(id(body[0].value))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
            for t in node.targets
        ):
            prose.add(id(node.value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    ]


def test_vulkan_devices_keeps_no_device_file_names_of_its_own() -> None:
    """The node names and patterns live in gpu_files only: vulkan_devices imports them."""
    strings = code_strings(Path(vulkan_devices.__file__))
    assert [text for text in strings if "/dev/" in text] == []
    assert vulkan_devices.NVIDIA_SHARED_FILES is gpu_files.NVIDIA_SHARED_FILES


def test_one_source_names_the_gpu_nodes() -> None:
    """A Tegra GPU's node names and the /dev/nvidiaN and render node patterns are code in one
    Python source of the collection's plugins and the payload: gpu_files (the payload's is a
    link to it)."""
    sources = [
        path.relative_to(REPO).as_posix()
        for root in ("collections/ansible_collections/gpulab/cluster/plugins", "payload/src")
        for path in sorted((REPO / root).rglob("*.py"))
        if not path.is_symlink()
        and any(
            name in text
            for text in code_strings(path)
            for name in ("nvhost-", "nvgpu/", "/dev/nvidia", "renderD")
        )
    ]
    assert sources == [
        "collections/ansible_collections/gpulab/cluster/plugins/module_utils/gpu_files.py"
    ]
