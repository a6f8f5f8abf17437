"""Vulkan on the workers: the loader and Mesa's lavapipe, found by vulkaninfo; the Jetson
stand-in's L4T marks, and the Orin GRES and node features Slurm gets from its recording."""

from __future__ import annotations

import json
import re

from conftest import Cluster

RECORDING = "/usr/local/lib/gpulab-standin/vulkaninfo"
# The GPU nodes of L4T r36's nvgpu and nvmap drivers that the stand-in carries.
TEGRA_NODE = re.compile(r"^/dev/(nvmap|nvhost-[a-z-]+|nvgpu/igpu0/[a-z-]+)$")
STANDIN_NODES = ["/dev/nvmap", "/dev/nvhost-ctrl-gpu", "/dev/nvgpu/igpu0/ctrl"]


def test_loader_and_lavapipe_installed(cluster: Cluster, worker: str) -> None:
    node = cluster.node(worker)
    # glslc: the GLSL compiler of a graph's own kernels (payload/examples/user_kernels.json).
    for package in ("libvulkan1", "mesa-vulkan-drivers", "vulkan-tools", "glslc"):
        assert node.package(package).is_installed, f"{worker}: {package} missing"


def test_vulkaninfo_lists_llvmpipe(cluster: Cluster, worker: str) -> None:
    # On the stand-in too: the loader skips JetPack's ICD (its library is absent).
    summary = cluster.node(worker).check_output("vulkaninfo --summary")
    assert "deviceName         = llvmpipe" in summary
    assert "PHYSICAL_DEVICE_TYPE_CPU" in summary


def test_no_gres_for_a_cpu_device(cluster: Cluster, lavapipe_worker: str) -> None:
    # lavapipe has no device file: Slurm gets no GPU GRES for a lavapipe-only worker.
    node_name = cluster.node_name(lavapipe_worker)
    gres_conf = cluster.node(lavapipe_worker).file("/etc/slurm/gres.conf")
    if gres_conf.exists:
        assert f"NodeName={node_name} " not in gres_conf.content_string
    shown = cluster.node(cluster.controller).check_output("scontrol show node %s", node_name)
    assert re.search(r"\bGres=\(null\)", shown), shown


def test_standin_carries_l4t_marks(cluster: Cluster, standin: str) -> None:
    node = cluster.node(standin)
    release = node.file("/etc/nv_tegra_release").content_string
    assert release.startswith("# R36 (release), REVISION: "), release
    icd = json.loads(node.file("/etc/vulkan/icd.d/nvidia_icd.json").content_string)
    assert icd["ICD"]["library_path"] == "libGLX_nvidia.so.0"
    for path in STANDIN_NODES:
        # As JetPack's udev rules leave them: character devices, root:video 0660.
        stat = node.check_output("stat -c '%%F %%U %%G %%a' %s", path)
        assert stat == "character special file root video 660", f"{standin}: {path}: {stat}"


def test_standin_recording_is_an_orin(cluster: Cluster, standin: str) -> None:
    node = cluster.node(standin)
    summary = node.check_output("%s --summary", RECORDING)
    assert "deviceName         = NVIDIA Tegra Orin (nvgpu)" in summary
    full = node.check_output(RECORDING)
    assert re.search(r"^\s+subgroupSize\s+= 32$", full, re.M)
    assert re.search(r"^\s+shaderFloat64\s+= true$", full, re.M)


def test_standin_jobs_still_run_on_lavapipe(cluster: Cluster, standin: str) -> None:
    # The stand-in has no Tegra GPU: what the job user's Vulkan sees is lavapipe.
    user = cluster.var("identity_users")[0]["name"]
    devices = json.loads(
        cluster.node(standin).check_output("runuser -u %s -- gpulab devices --json", user)
    )
    assert "llvmpipe" in json.dumps(devices)


def test_standin_job_users_in_video(cluster: Cluster, standin: str) -> None:
    # JetPack gives Tegra's GPU nodes to group video (root:video 0660).
    node = cluster.node(standin)
    for user in cluster.var("identity_users"):
        assert "video" in node.user(user["name"]).groups, f"{standin}: {user['name']} not in video"


def test_standin_gres_is_the_orin(cluster: Cluster, standin: str) -> None:
    node_name = cluster.node_name(standin)
    node = cluster.node(standin)
    gres_file = node.file("/etc/slurm/gres.conf")
    assert gres_file.exists, f"{standin}: no /etc/slurm/gres.conf"
    gres_conf = gres_file.content_string
    prefix = f"NodeName={node_name} Name=gpu "
    lines = [line for line in gres_conf.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, gres_conf
    match = re.fullmatch(rf"NodeName={node_name} Name=gpu Type=orin File=(\S+)", lines[0])
    assert match and TEGRA_NODE.match(match.group(1)), lines[0]
    assert node.check_output("stat -c %%F %s", match.group(1)) == "character special file"


def test_standin_slurm_node_has_orin_gres_and_features(cluster: Cluster, standin: str) -> None:
    # What slurmctld read from slurm.conf (its included nodes.conf) for the stand-in.
    shown = cluster.node(cluster.controller).check_output(
        "scontrol show node %s", cluster.node_name(standin)
    )
    assert re.search(r"\bGres=gpu:orin:1\b", shown), shown
    features = re.search(r"\bAvailableFeatures=(\S+)", shown)
    assert features, shown
    assert {"vulkan1.3", "subgroup32", "fp64"} <= set(features.group(1).split(",")), shown
