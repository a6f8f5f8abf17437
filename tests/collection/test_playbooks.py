"""The collection's playbooks: gpulab.cluster.site is the component playbooks imported, each
component's plays carry its tag, and `--tags COMPONENT` (or the component playbook alone)
runs that component's roles only, with the facts that they need from the others."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import ansible_fork

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "collections/ansible_collections/gpulab/cluster/playbooks"
BIN = Path(sys.executable).parent
# Each component (its playbook and its tag) and the roles it runs.
COMPONENTS = {
    "apt_sources": {"apt_sources"},
    "identity": {"identity"},
    "timesync": {"timesync"},
    "munge": {"munge"},
    "storage": {"nfs_server", "nfs_client"},
    "vulkan": {"vulkan"},
    "slurm": {"slurm"},
    "payload": {"payload"},
    "monitoring": {"monitoring"},
}
IMPORT = "ansible.builtin.import_playbook"
# The roles that import gpulab.cluster.converge_gate (its tasks run under their tags).
GATED = {"identity", "munge", "nfs_server", "slurm", "monitoring"}
ROLE_TASK = re.compile(r"gpulab\.cluster\.([a-z_]+) : (?!Validating arguments)")


def _plays(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = yaml.safe_load((PLAYBOOKS / f"{name}.yml").read_text())
    return loaded


def _list_tasks(*args: str) -> str:
    inventory = "all:\n  children:\n" + "".join(
        f"    {group}:\n      hosts:\n        {group}1:\n"
        for group in ("controller", "storage", "workers")
    )
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = ansible_fork.run(
        [str(BIN / "ansible-playbook"), "--list-tasks", "-i", "/dev/stdin", *args],
        input=inventory, env=env, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_site_imports_every_component_playbook_in_order() -> None:
    plays = _plays("site")
    assert all(set(play) == {"name", IMPORT} for play in plays)
    assert [Path(play[IMPORT]).stem for play in plays] == list(COMPONENTS)


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_component_playbook_gathers_facts_then_runs_its_roles_under_its_tag(
    component: str,
) -> None:
    plays = _plays(component)
    assert Path(plays[0][IMPORT]).stem in ("facts", "vulkan_devices")
    roles = set()
    for play in plays[1:]:
        assert play["tags"] == [component], play["name"]
        assert play["gather_facts"] is False, play["name"]
        roles |= {entry["role"].rsplit(".", 1)[-1] for entry in play["roles"]}
    assert roles == COMPONENTS[component]


@pytest.mark.parametrize("component", COMPONENTS)
def test_tags_run_one_component(component: str) -> None:
    """... with the converge gate that its gated roles import (gpulab.cluster.converge_gate)."""
    listed = _list_tasks("site.yml", f"--tags={component}")
    gate = {"converge_gate"} if COMPONENTS[component] & GATED else set()
    assert set(ROLE_TASK.findall(listed)) == COMPONENTS[component] | gate


def test_the_facts_play_runs_whatever_the_tags() -> None:
    listed = _list_tasks("site.yml", "--tags=munge")
    assert "Gather the facts not gathered yet" in listed


@pytest.mark.parametrize("component", ["slurm", "monitoring"])
def test_slurm_and_monitoring_read_the_vulkan_devices_under_their_tag(component: str) -> None:
    """Without the vulkan play, gres.conf and node features would lose the GPUs."""
    listed = _list_tasks("site.yml", f"--tags={component}")
    assert "Read the Vulkan devices" in listed


def test_every_validate_play_has_the_validate_tag() -> None:
    assert all(play["tags"] == ["validate"] for play in _plays("validate"))
