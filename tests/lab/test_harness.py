"""The lab scripts, the lab inventory and the molecule scenario describe the same cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_GROUPS = {"controller", "storage", "workers"}


def _inventory_groups() -> dict[str, set[str]]:
    hosts = yaml.safe_load((ROOT / "inventory/lab/hosts.yml").read_text())
    children = hosts["all"]["children"]
    return {group: set(body["hosts"]) for group, body in children.items()}


def _platforms() -> list[dict[str, Any]]:
    scenario = yaml.safe_load((ROOT / "molecule/default/molecule.yml").read_text())
    platforms: list[dict[str, Any]] = scenario["platforms"]
    return platforms


def _wrapper_network() -> str:
    """The network lab/molecule-test.sh cleans up before a run."""
    for line in (ROOT / "lab/molecule-test.sh").read_text().splitlines():
        if line.startswith("network="):
            return line.split("=", 1)[1].split()[0]
    raise AssertionError("lab/molecule-test.sh names no network")


def _lab_nodes() -> list[str]:
    out = subprocess.run(
        ["bash", "-c", '. lab/lib.sh && printf "%s\\n" "${LAB_NODES[@]}"'],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()


def test_inventory_has_the_contract_groups() -> None:
    assert set(_inventory_groups()) == CONTRACT_GROUPS


def test_lab_containers_are_the_inventory_hosts() -> None:
    hosts = yaml.safe_load((ROOT / "inventory/lab/hosts.yml").read_text())
    for body in hosts["all"]["children"].values():
        for name, hostvars in body["hosts"].items():
            assert hostvars["ansible_host"] == f"gpulab-lab-{name}"
    assert set(_lab_nodes()) == set().union(*_inventory_groups().values())


def test_molecule_platforms_mirror_the_lab_inventory() -> None:
    groups: dict[str, set[str]] = {}
    for platform in _platforms():
        assert platform["hostname"] == platform["name"]  # the Slurm NodeName
        assert platform["ulimits"] == ["host"]
        assert platform["network"] == _wrapper_network()
        for group in platform["groups"]:
            groups.setdefault(group, set()).add(platform["name"])
    assert groups == _inventory_groups()


def test_build_image_rejects_unknown_arguments() -> None:
    run = subprocess.run(
        ["bash", "lab/build-image.sh", "--colour", "red"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "build-image.sh: unknown argument '--colour' (use --suite SUITE, --arch ARCH)"
    ]
