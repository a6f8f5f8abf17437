"""The lab scripts, the lab inventory and the molecule scenario describe the same cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_GROUPS = {"controller", "storage", "workers"}
# The lab's own group: the worker that stands in for a Jetson (lab/standin.yml).
STANDIN_GROUP = "jetson_standin"


def _inventory_groups() -> dict[str, set[str]]:
    hosts = yaml.safe_load((ROOT / "inventory/lab/hosts.yml").read_text())
    children = hosts["all"]["children"]
    return {group: set(body["hosts"]) for group, body in children.items()}


def _platforms() -> list[dict[str, Any]]:
    scenario = yaml.safe_load((ROOT / "molecule/default/molecule.yml").read_text())
    platforms: list[dict[str, Any]] = scenario["platforms"]
    return platforms


def _words(*command: str) -> list[str]:
    """The whitespace-separated words a lab command prints."""
    run = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    return run.stdout.split()


def _scenario_names(kind: str, scenario: str = "default") -> list[str]:
    """The networks or volumes lab/molecule-test.sh cleans up before a run of SCENARIO."""
    return _words("python3", "lab/scenario_names.py", kind, f"molecule/{scenario}/molecule.yml")


def _lib(expression: str) -> list[str]:
    """The words of a lab/lib.sh variable, e.g. "${LAB_NODES[@]}"."""
    return _words("bash", "-c", f'. lab/lib.sh && printf "%s\\n" {expression}')


def _lab_nodes() -> list[str]:
    return _lib('"${LAB_NODES[@]}"')


def test_inventory_has_the_contract_groups_and_the_standin() -> None:
    assert set(_inventory_groups()) == CONTRACT_GROUPS | {STANDIN_GROUP}


def test_the_standin_is_one_worker_with_the_same_devices_everywhere() -> None:
    groups = _inventory_groups()
    assert groups[STANDIN_GROUP] == set(_lib("$LAB_STANDIN_NODE")) <= groups["workers"]
    devices = _lib('"${LAB_STANDIN_DEVICES[@]}"')
    assert "/dev/nvgpu/igpu0/ctrl" in devices
    platforms = [p for p in _platforms() if STANDIN_GROUP in p["groups"]]
    assert [p["name"] for p in platforms] == sorted(groups[STANDIN_GROUP])
    assert platforms[0]["devices"] == [f"/dev/null:{path}" for path in devices]


def test_lab_containers_are_the_inventory_hosts() -> None:
    hosts = yaml.safe_load((ROOT / "inventory/lab/hosts.yml").read_text())
    for group in CONTRACT_GROUPS:  # where each host is defined; the stand-in group only names one
        for name, hostvars in hosts["all"]["children"][group]["hosts"].items():
            assert hostvars["ansible_host"] == f"gpulab-lab-{name}"
    assert set(_lab_nodes()) == set().union(*_inventory_groups().values())


def test_molecule_platforms_mirror_the_lab_inventory() -> None:
    groups: dict[str, set[str]] = {}
    for platform in _platforms():
        assert platform["hostname"] == platform["name"]  # the Slurm NodeName
        assert platform["ulimits"] == ["host"]
        assert [platform["network"]] == _scenario_names("networks")
        for group in platform["groups"]:
            groups.setdefault(group, set()).add(platform["name"])
    assert groups == _inventory_groups()


def _refusal(*command: str) -> list[str]:
    """The stderr lines of a lab script that must refuse its arguments with exit 2."""
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 2
    return run.stderr.strip().splitlines()


def test_build_image_rejects_unknown_arguments() -> None:
    assert _refusal("bash", "lab/build-image.sh", "--colour", "red") == [
        "build-image.sh: unknown argument '--colour' (use --suite SUITE, --arch ARCH)"
    ]


def test_molecule_wrapper_cleans_the_default_scenario_network_and_volume() -> None:
    assert _scenario_names("networks") == ["gpulab-molecule"]
    assert _scenario_names("volumes") == ["gpulab-molecule-shared"]


def test_every_scenario_has_its_own_network_volume_and_containers() -> None:
    """Scenarios can run side by side only when they share no podman names."""
    seen: dict[str, str] = {}
    for scenario_file in sorted((ROOT / "molecule").glob("*/molecule.yml")):
        scenario = scenario_file.parent.name
        platforms = yaml.safe_load(scenario_file.read_text())["platforms"]
        names = [p["name"] for p in platforms]
        names += _scenario_names("networks", scenario) + _scenario_names("volumes", scenario)
        for name in names:
            assert name not in seen, f"{name} is used by {seen.get(name)} and {scenario}"
            seen[name] = scenario


def test_molecule_wrapper_rejects_an_unknown_scenario() -> None:
    assert _refusal("bash", "lab/molecule-test.sh", "--scenario", "nope") == [
        "molecule-test.sh: no scenario 'nope' (molecule/nope/molecule.yml is missing)"
    ]
