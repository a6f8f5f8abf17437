"""lab/cluster.yml defines the lab cluster once: the lab scripts, the lab inventory and every
molecule scenario read it, and nothing else defines a node, a network or the shared path."""

from __future__ import annotations

import ast
import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.cluster import DEFINITION, ClusterError, Place, place, place_names

ROOT = Path(__file__).resolve().parents[2]
BASE_CONFIG = ROOT / ".config/molecule/config.yml"
CONTRACT_GROUPS = {"controller", "storage", "workers"}
# The lab's own group: the worker that stands in for a Jetson (lab/standin.yml).
STANDIN_GROUP = "jetson_standin"
CONNECTION = ROOT / "inventory/lab/group_vars/all/connection.yml"


def _definition() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DEFINITION.read_text())
    return loaded


def _scenarios() -> dict[str, dict[str, Any]]:
    return {
        path.parent.name: yaml.safe_load(path.read_text())
        for path in sorted((ROOT / "molecule").glob("*/molecule.yml"))
    }


def _lib(expression: str) -> list[str]:
    """The words of a lab/lib.sh variable, e.g. "${LAB_NODES[@]}"."""
    run = subprocess.run(
        ["bash", "-c", f'. lab/lib.sh && printf "%s\\n" {expression}'],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return run.stdout.split()


def _groups(p: Place, *, by_node: bool) -> dict[str, set[str]]:
    groups: dict[str, set[str]] = {}
    for c in p.containers:
        for group in c.groups:
            groups.setdefault(group, set()).add(c.node if by_node else c.name)
    return groups


def test_the_lab_has_the_contract_groups_and_one_standin_worker() -> None:
    groups = _groups(place("lab"), by_node=True)
    assert set(groups) == CONTRACT_GROUPS | {STANDIN_GROUP}
    assert len(groups[STANDIN_GROUP]) == 1
    assert groups[STANDIN_GROUP] <= groups["workers"]
    (standin,) = place("lab").group(STANDIN_GROUP)
    assert "/dev/nvgpu/igpu0/ctrl" in standin.devices  # what lab/standin.yml checks for


def test_every_scenario_is_a_place_and_every_place_but_the_lab_a_scenario() -> None:
    assert set(_scenarios()) == set(place_names()) - {"lab"}


@pytest.mark.parametrize("scenario", sorted(_scenarios()))
def test_a_scenario_names_only_its_place_containers(scenario: str) -> None:
    """A platform with anything but a name would define part of a node outside cluster.yml."""
    platforms = _scenarios()[scenario]["platforms"]
    assert platforms == [{"name": c.name} for c in place(scenario).containers]


@pytest.mark.parametrize("scenario", sorted(_scenarios()))
def test_a_scenario_reads_the_lab_connection_and_the_cluster_inventory(scenario: str) -> None:
    base = yaml.safe_load(BASE_CONFIG.read_text())
    links = base["provisioner"]["inventory"]["links"]
    links |= _scenarios()[scenario].get("provisioner", {}).get("inventory", {}).get("links", {})
    directory = ROOT / "molecule" / scenario
    assert (directory / links["group_vars"] / "all/connection.yml").resolve() == CONNECTION
    assert (directory / links["hosts"]).resolve() == ROOT / "molecule/shared/inventory.py"


def test_only_the_air_gapped_place_has_a_network_with_no_way_out() -> None:
    """molecule/shared/create.yml makes its network internal (lab/cluster.yml: internal)."""
    assert {name for name in place_names() if place(name).internal} == {"airgap"}
    created = json.loads(
        subprocess.run(["python3", "lab/cluster.py", "place", "airgap"], cwd=ROOT, check=True,
                       capture_output=True, text=True).stdout
    )  # fmt: skip
    assert created["internal"] is True


def test_scenarios_can_run_side_by_side() -> None:
    """No two places share a container, network or volume name."""
    seen: dict[str, str] = {}
    for name in place_names():
        p = place(name)
        for podman_name in [c.name for c in p.containers] + [p.network, p.shared_volume]:
            assert podman_name not in seen, (
                f"{podman_name}: places {seen.get(podman_name)} and {name}"
            )
            seen[podman_name] = name


def _inventory(inventory: str) -> dict[str, Any]:
    run = subprocess.run(
        ["ansible-inventory", "-i", inventory, "--list"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    loaded: dict[str, Any] = json.loads(run.stdout)
    return loaded


def _inventory_groups(data: dict[str, Any]) -> dict[str, set[str]]:
    return {
        name: set(body["hosts"])
        for name, body in data.items()
        if name not in ("_meta", "all") and body.get("hosts")
    }


def test_the_lab_inventory_is_the_place_lab() -> None:
    data = _inventory("inventory/lab")
    lab = place("lab")
    assert _inventory_groups(data) == _groups(lab, by_node=True)
    hostvars = data["_meta"]["hostvars"]
    assert {h: v["ansible_host"] for h, v in hostvars.items()} == {
        c.node: c.name for c in lab.containers
    }
    assert {v["nfs_client_mount_point"] for v in hostvars.values()} == {"{{ lab_shared_path }}"}
    assert {v["lab_shared_path"] for v in hostvars.values()} == {lab.shared_path}
    # The payload is built from this checkout (the collection's default is its tarball's sdist).
    assert {v["lab_checkout"] for v in hostvars.values()} == {str(ROOT)}
    assert {v["payload_source_dir"] for v in hostvars.values()} == {"{{ lab_checkout }}/payload"}
    # Nothing in inventory/lab but the script and the group variables.
    assert sorted(p.name for p in (ROOT / "inventory/lab").iterdir()) == ["group_vars", "hosts.py"]


def test_a_scenario_inventory_groups_its_platforms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOLECULE_SCENARIO_NAME", "faults")
    data = _inventory("molecule/shared/inventory.py")
    assert _inventory_groups(data) == _groups(place("faults"), by_node=False)
    assert "fault_lab" in data and "jetson_standin" not in data


def test_lib_sh_gives_the_place_lab_to_up_and_down() -> None:
    lab = place("lab")
    assert _lib('"${LAB_NODES[@]}"') == [c.node for c in lab.containers]
    assert _lib("$LAB_PREFIX") == ["gpulab-lab-"]
    assert [f"{_lib('$LAB_PREFIX')[0]}{n}" for n in _lib('"${LAB_NODES[@]}"')] == [
        c.name for c in lab.containers
    ]
    (standin,) = lab.group(STANDIN_GROUP)
    assert _lib("$LAB_STANDIN_NODE") == [standin.node]
    assert _lib("$LAB_CONTROLLER_NODE") == [lab.group("controller")[0].node]
    assert _lib('"${LAB_STANDIN_DEVICES[@]}"') == list(standin.devices)
    # storage1's capability, its address, and every node's names for its /etc/hosts.
    (storage,) = lab.group("storage")
    assert _lib("${LAB_RUN_OPTIONS[storage1]}") == [
        "--cap-add=DAC_READ_SEARCH",
        f"--ip={storage.ip}",
        *(f"--add-host={name}:{ip}" for name, ip in lab.etc_hosts.items()),
    ]
    assert lab.etc_hosts["storage1"] == lab.etc_hosts["gpulab-lab-storage1"] == storage.ip
    assert _lib("$LAB_NETWORK $LAB_SUBNET $LAB_SHARED_VOLUME $LAB_SHARED_PATH") == [
        lab.network,
        lab.subnet,
        lab.shared_volume,
        lab.shared_path,
    ]


# A stand-in for podman that records each call and answers as for a host without a lab:
# lab/up.sh then creates the whole lab, and no real container is touched.
FAKE_PODMAN = """#!/bin/bash
echo "$*" >> "$FAKE_PODMAN_CALLS"
case "$1 $2" in
  "image exists") exit 0 ;;
  "network exists"|"network inspect"|"container exists"|"volume exists") exit 1 ;;
  "exec "*) case "$*" in *is-system-running*) echo running ;; esac ;;
esac
"""


def test_up_sh_runs_each_node_of_the_place_lab(tmp_path: Path) -> None:
    (tmp_path / "podman").write_text(FAKE_PODMAN)
    (tmp_path / "podman").chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "FAKE_PODMAN_CALLS": str(calls),
        "GPULAB_APT_CACHE": str(tmp_path / "debs"),
    }
    subprocess.run(["bash", "lab/up.sh"], cwd=ROOT, env=env, check=True, capture_output=True)
    runs = [line.split() for line in calls.read_text().splitlines() if line.startswith("run ")]
    lab = place("lab")
    assert len(runs) == len(lab.containers)
    for run, c in zip(runs, lab.containers, strict=True):
        assert run[run.index("--name") + 1] == c.name
        assert run[run.index("--hostname") + 1] == c.node
        assert run[run.index("--network") + 1] == lab.network
        assert run[-1] == c.image
        assert {f"{tmp_path / 'debs'}:{lab.apt_cache_path}", lab.volumes[1]} <= set(run)
        assert [w for w in run if w.startswith("--cap-add=")] == [
            f"--cap-add={cap}" for cap in c.capabilities
        ]
        assert [w for w in run if w.startswith("--device=")] == [
            f"--device=/dev/null:{path}" for path in c.devices
        ]
        assert f"--ip={c.ip}" in run
        assert {f"--add-host={name}:{ip}" for name, ip in lab.etc_hosts.items()} <= set(run)
    [network] = [
        line.split() for line in calls.read_text().splitlines() if line.startswith("network create")
    ]
    assert network[network.index("--subnet") + 1] == lab.subnet


def _node_names() -> set[str]:
    return {c.node for name in place_names() for c in place(name).containers}


def _code_lines(path: Path) -> list[str]:
    """The lines of a script or playbook that are not comments."""
    lines = path.read_text().splitlines()
    return [line for line in lines if line.strip() and not line.strip().startswith("#")]


def _python_strings(path: Path) -> list[str]:
    """The string literals of a Python file, docstrings aside."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def _defining_files() -> list[Path]:
    """The scripts, playbooks, inventory and tests that must take the cluster from cluster.yml."""
    files = list((ROOT / "lab").glob("*.sh")) + list((ROOT / "inventory/lab").rglob("*.yml"))
    files += [p for p in (ROOT / "lab").glob("*.py") if p != DEFINITION.with_suffix(".py")]
    files += [p for p in (ROOT / "molecule").rglob("*") if p.suffix in (".yml", ".py")]
    files.append(BASE_CONFIG)
    return [p for p in files if p.name != "molecule.yml"]  # platforms: checked above


def test_no_script_playbook_or_test_names_a_node_or_the_shared_path() -> None:
    word = re.compile(r"\b(" + "|".join(sorted(_node_names())) + r")\b")
    shared_path = _definition()["shared_path"]
    found = []
    for path in _defining_files():
        texts = _python_strings(path) if path.suffix == ".py" else _code_lines(path)
        found += [f"{path.relative_to(ROOT)}: {t.strip()}" for t in texts if word.search(t)]
        found += [f"{path.relative_to(ROOT)}: {t.strip()}" for t in texts if shared_path in t]
    assert found == []


def _refused(definition: dict[str, Any], name: str = "lab") -> str:
    with pytest.raises(ClusterError) as refused:
        place(name, definition)
    return str(refused.value)


def test_a_wrong_definition_is_refused_in_one_line() -> None:
    unknown_key = copy.deepcopy(_definition())
    unknown_key["nodes"]["worker1"]["gpus"] = 2
    assert _refused(unknown_key) == "cluster.yml: node worker1 (place lab) has unknown keys gpus"
    shared_address = copy.deepcopy(_definition())
    shared_address["nodes"]["worker1"]["address"] = 22
    assert _refused(shared_address, "faults") == (
        "cluster.yml: place faults gives two nodes the same address"
    )
    no_address = copy.deepcopy(_definition())
    del no_address["nodes"]["worker1"]["address"]
    assert _refused(no_address, "faults") == (
        "cluster.yml: node worker1 has no address on place faults's subnet"
    )
    assert _refused(_definition(), "nope") == (
        f"cluster.yml: no place 'nope' (known: {', '.join(place_names())})"
    )


def _refusal(*command: str) -> list[str]:
    """The stderr lines of a lab script that must refuse its arguments with exit 2."""
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 2
    return run.stderr.strip().splitlines()


def test_build_image_rejects_unknown_arguments() -> None:
    assert _refusal("bash", "lab/build-image.sh", "--colour", "red") == [
        "build-image.sh: unknown argument '--colour' (use --suite SUITE, --arch ARCH)"
    ]


def test_molecule_wrapper_rejects_an_unknown_scenario() -> None:
    assert _refusal("bash", "lab/molecule-test.sh", "--scenario", "nope") == [
        "molecule-test.sh: no scenario 'nope' (molecule/nope/molecule.yml is missing)"
    ]


def test_cluster_py_refuses_an_unknown_place() -> None:
    assert _refusal("python3", "lab/cluster.py", "place", "nope") == [
        f"cluster.py: cluster.yml: no place 'nope' (known: {', '.join(place_names())})"
    ]


def test_a_spare_node_joins_the_inventory_only_when_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default place's spare worker (molecule/shared/grow.yml) is created and put in its
    groups only when it joins; destroy removes it with the others."""
    default = place("default")
    assert [s.node for s in default.spares] == ["worker3"]
    assert "worker3" not in {c.node for c in default.containers}
    monkeypatch.setenv("MOLECULE_SCENARIO_NAME", "default")
    monkeypatch.delenv("GPULAB_JOINED", raising=False)
    assert "worker3" not in _inventory_groups(_inventory("molecule/shared/inventory.py"))["workers"]
    monkeypatch.setenv("GPULAB_JOINED", "worker3")
    assert "worker3" in _inventory_groups(_inventory("molecule/shared/inventory.py"))["workers"]
    place_json = json.loads(
        subprocess.run(
            ["python3", "lab/cluster.py", "place", "default"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
    )  # fmt: skip
    assert [c["name"] for c in place_json["spares"]] == ["worker3"]
    assert all(c["name"] != "worker3" for c in place_json["containers"])
