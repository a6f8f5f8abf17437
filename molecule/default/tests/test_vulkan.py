"""Vulkan on the workers: the loader and Mesa's lavapipe, found by vulkaninfo."""

from __future__ import annotations

from conftest import Cluster


def test_loader_and_lavapipe_installed(cluster: Cluster, worker: str) -> None:
    node = cluster.node(worker)
    for package in ("libvulkan1", "mesa-vulkan-drivers", "vulkan-tools"):
        assert node.package(package).is_installed, f"{worker}: {package} missing"


def test_vulkaninfo_lists_llvmpipe(cluster: Cluster, worker: str) -> None:
    summary = cluster.node(worker).check_output("vulkaninfo --summary")
    assert "deviceName         = llvmpipe" in summary
    assert "PHYSICAL_DEVICE_TYPE_CPU" in summary


def test_no_gres_for_a_cpu_device(cluster: Cluster) -> None:
    # lavapipe has no device file: Slurm gets no GPU GRES for it.
    controller = cluster.node(cluster.controller)
    assert not controller.file("/etc/slurm/gres.conf").exists
