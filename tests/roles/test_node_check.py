"""playbooks/node-check.yml on this machine, for real: one node checked on its own.

The vulkan role with vulkan_install_packages false (no apt: it only finds the loader and
vulkaninfo), the slurm role's render entry point (the files the node would get, nothing
installed), the payload role installing its venv offline from the wheelhouse it builds (its
venv, link and results in a temporary folder), and the validation job script run directly on
lavapipe. The same playbook ran on the NVIDIA H200 (docs/hardware.md). A second run changes
nothing in what the roles manage: only the job script runs again and its report is rewritten.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import ansible_fork

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Tasks that change something on every run by design: the check itself and its report.
ALWAYS_CHANGED = {"Run the validation job script directly", "Write node-check-report.md"}


def _run(work: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_NOCOLOR": "1",
    }
    extra = {
        "vulkan_install_packages": False,
        "node_check_dir": str(work / "check"),
        "payload_venv": str(work / "venv"),
        "payload_command_link": str(work / "bin/gpulab"),
    }
    (work / "bin").mkdir(exist_ok=True)
    done = ansible_fork.run(
        [str(BIN / "ansible-playbook"), "-i", "inventory/node-check", "playbooks/node-check.yml",
         "-e", json.dumps(extra)],
        cwd=ROOT, env=env,
    )  # fmt: skip
    start = done.stdout.find("{")
    report: dict[str, Any] = json.loads(done.stdout[start:]) if start >= 0 else {}
    return done, report


def _changed_tasks(report: dict[str, Any]) -> set[str]:
    return {
        task["task"]["name"].split(" : ")[-1]
        for play in report.get("plays", [])
        for task in play["tasks"]
        if any(result.get("changed") for result in task["hosts"].values())
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    work = tmp_path_factory.mktemp("node-check")
    reports = []
    for _ in range(2):
        done, report = _run(work)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        reports.append(report)
    return work, reports


def test_the_node_gets_its_features_and_no_gres_for_a_cpu_device(
    runs: tuple[Path, list[dict[str, Any]]],
) -> None:
    work, _ = runs
    slurm = work / "check/slurm"
    assert sorted(p.name for p in slurm.iterdir()) == [
        "gpulab-healthcheck",  # lavapipe is a Vulkan device: the node gets the GPU check
        "nodes.conf",
        "plugins.conf",
        "slurm.conf",
    ]
    [node_line] = [
        line
        for line in (slurm / "nodes.conf").read_text().splitlines()
        if line.startswith("NodeName=")
    ]
    assert "Gres=" not in node_line
    assert "Features=fp64,llvmpipe,subgroup8,vulkan1.3" in node_line


def test_the_payload_runs_from_its_offline_venv(runs: tuple[Path, list[dict[str, Any]]]) -> None:
    work, _ = runs
    devices = subprocess.run(
        [str(work / "bin/gpulab"), "devices", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(devices.stdout)[0]["name"].startswith("llvmpipe")


def test_the_validation_job_passed_on_lavapipe(runs: tuple[Path, list[dict[str, Any]]]) -> None:
    work, _ = runs
    report = (work / "check/node-check-report.md").read_text()
    assert "| llvmpipe" in report
    assert "**FAILED**" not in report


def test_a_second_run_changes_nothing_the_roles_manage(
    runs: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, reports = runs
    assert _changed_tasks(reports[1]) <= ALWAYS_CHANGED


def _release(mode: str, path: Path) -> str:
    script = ROOT / "roles/payload/files/payload_release.py"
    done = subprocess.run([sys.executable, str(script), mode, str(path)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    release: str = json.loads(done.stdout)["release"]
    return release


def test_a_ready_wheelhouse_is_deployed_with_nothing_built(
    runs: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """payload_wheelhouse_dir: the release folder the node check built (as one unpacked from a
    release artefact would be), installed into another venv; no build task runs and nothing is
    written to payload_build_dir."""
    wheelhouse = ROOT / "build/payload" / _release("source", ROOT / "payload")
    assert wheelhouse.is_dir()
    extra = {
        "payload_wheelhouse_dir": str(wheelhouse),
        "payload_build_dir": str(tmp_path / "no-build"),
        "payload_storage_dir": str(tmp_path / "shared"),
        "payload_shared_dir": str(tmp_path / "shared"),
        "payload_venv": str(tmp_path / "venv"),
        "payload_command_link": str(tmp_path / "gpulab"),
    }
    (tmp_path / "play.yml").write_text(
        "- hosts: workers\n  roles:\n    - role: gpulab.cluster.payload\n"
    )
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_NOCOLOR": "1",
    }
    done = ansible_fork.run(
        [str(BIN / "ansible-playbook"), "-i", "inventory/node-check", str(tmp_path / "play.yml"),
         "-e", json.dumps(extra)],
        cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads(done.stdout[done.stdout.find("{") :])
    ran = {
        task["task"]["name"]
        for play in report["plays"]
        for task in play["tasks"]
        if not all(result.get("skipped") for result in task["hosts"].values())
    }
    assert not [name for name in ran if "Build the gpulab wheel" in name or "Download" in name]
    assert "gpulab.cluster.payload : Install gpulab " + _release("wheelhouse", wheelhouse) in ran
    assert not (tmp_path / "no-build").exists()
    release = _release("wheelhouse", wheelhouse)
    assert (tmp_path / "venv/gpulab-release").read_text().strip() == release
    assert (tmp_path / f"shared/wheels/{release}").is_dir()
    devices = subprocess.run([str(tmp_path / "gpulab"), "devices", "--json"],
                             capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(devices.stdout)[0]["name"].startswith("llvmpipe")
