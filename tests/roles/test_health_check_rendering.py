"""The GPU health check as the slurm role renders it: slurm.conf's keys and the program per worker.

Like test_gres_rendering (whose recorded workers and runner it reuses): one ansible-playbook
run on local hosts, gpulab.cluster.vulkan_facts on recorded vulkaninfo outputs, the role's
facts.yml and its templates. Workers: a 2-GPU H200 node and a lavapipe node with the check, a
lavapipe node with `slurm_health_check: false`, and a lavapipe node whose gpulab hangs (a
stand-in that sleeps) with `slurm_health_check_timeout: 1`. The rendered programs then run here
for real, against this machine's lavapipe and the venv's gpulab, with no Slurm: the path of a
worker whose slurmctld does not answer. (tests/roles/test_role_validation.py holds the
refusals of a bad slurm_health_check_timeout.)
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.roles.playbook import BIN, ROOT, run_playbook
from tests.roles.test_gres_rendering import (
    HOSTNAME_MODULE,
    READ_DEVICES,
    TEMPLATES,
    WORKERS,
    _worker,
)

PROGRAM = "/usr/local/sbin/gpulab-healthcheck"
GPULAB = BIN / "gpulab"
HEALTH_WORKERS = {
    "h200node": WORKERS["h200node"],
    "labnode": WORKERS["labnode"] | {"vars": {"slurm_health_check_command": str(GPULAB)}},
    "offnode": WORKERS["labnode"] | {"vars": {"slurm_health_check": False}},
}
HUNG_TIMEOUT = 1
# A gpulab that never answers: `exec`, so that timeout's signal ends the sleep itself (a child
# left behind would hold the program's pipe open until it ends).
HUNG_GPULAB = "#!/bin/sh\nexec sleep 60\n"


def _health_workers(work: Path) -> dict[str, dict[str, Any]]:
    """HEALTH_WORKERS and the hung node, whose stand-in gpulab is written into `work`."""
    hung = work / "hung-gpulab"
    hung.write_text(HUNG_GPULAB)
    hung.chmod(0o755)
    hung_vars = {"slurm_health_check_command": str(hung),
                 "slurm_health_check_timeout": HUNG_TIMEOUT}  # fmt: skip
    return HEALTH_WORKERS | {"hungnode": WORKERS["labnode"] | {"vars": hung_vars}}


def _playbook(out: Path) -> list[dict[str, Any]]:
    return [
        {
            "name": "Read the devices and render the health check",
            "hosts": "all",
            "gather_facts": False,
            "tasks": [
                *READ_DEVICES,
                {"name": "Load Debian's paths", "ansible.builtin.include_vars": {
                    "file": f"{ROOT}/roles/slurm/vars/Debian.yml"}},
                {"name": "Describe the node", "ansible.builtin.include_role": {
                    "name": "slurm", "tasks_from": "facts", "public": True}},
                {"name": "Render slurm.conf", "run_once": True,
                 "ansible.builtin.template": {"src": f"{TEMPLATES}/slurm.conf.j2",
                                              "dest": f"{out}/slurm.conf", "mode": "0644"}},
                {"name": "Render the program",
                 "when": "_slurm_is_worker and _slurm_health_check_on",
                 "ansible.builtin.template": {"src": f"{TEMPLATES}/gpulab-healthcheck.j2",
                                              "dest": f"{out}/{{{{ inventory_hostname }}}}.sh",
                                              "mode": "0755"}},
            ],
        }
    ]  # fmt: skip


def _render(work: Path, workers: dict[str, dict[str, Any]]) -> tuple[Path, list[Any]]:
    out = work / "out"
    out.mkdir()
    (work / "library").mkdir()
    (work / "library/fake_hostname.py").write_text(HOSTNAME_MODULE)
    local = {
        "ansible_connection": "local",
        "ansible_python_interpreter": str(BIN / "python"),
        "slurm_node_cpus": 2,
        "slurm_node_real_memory": 2048,
        "slurm_cgroups": "disabled",
    }
    hosts = {name: local | _worker(work, name, spec) for name, spec in workers.items()}
    inventory = {
        "all": {
            "hosts": {"ctlnode": local, **hosts},
            "children": {
                "controller": {"hosts": {"ctlnode": {}}},
                "workers": {"hosts": {name: {} for name in workers}},
            },
        }
    }
    (work / "hosts.json").write_text(json.dumps(inventory))
    (work / "play.yml").write_text(yaml.safe_dump(_playbook(out), sort_keys=False))
    return out, [
        run_playbook(work, ANSIBLE_LIBRARY=str(work / "library"))["stats"] for _ in range(2)
    ]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    work = tmp_path_factory.mktemp("health")
    return _render(work, _health_workers(work))


def _health_lines(slurm_conf: str) -> list[str]:
    return [line for line in slurm_conf.splitlines() if line.startswith("HealthCheck")]


def _setting(program: str, name: str) -> str:
    return next(line for line in program.splitlines() if line.startswith(f"{name}="))


def test_slurm_conf_names_the_program(rendered: tuple[Path, list[Any]]) -> None:
    assert _health_lines((rendered[0] / "slurm.conf").read_text()) == [
        f"HealthCheckProgram={PROGRAM}",
        "HealthCheckInterval=300",
        "HealthCheckNodeState=ANY",
    ]


def test_each_worker_checks_its_own_devices(rendered: tuple[Path, list[Any]]) -> None:
    out = rendered[0]
    h200, lab, off, hung = (out / f"{name}.sh" for name in (*HEALTH_WORKERS, "hungnode"))
    assert _setting(h200.read_text(), "devices") == "devices=2"
    assert _setting(h200.read_text(), "gpulab") == "gpulab=/opt/gpulab/venv/bin/gpulab"
    assert _setting(h200.read_text(), "node") == "node=${SLURMD_NODENAME:-h200node}"
    assert _setting(lab.read_text(), "devices") == "devices=1"
    # The check is off there, but slurm.conf names the program on every node: it gets one
    # that runs no GPU check (and would lift an old drain of its own).
    assert _setting(off.read_text(), "devices") == "devices=0"
    for program in (h200, lab, off, hung):
        subprocess.run(["bash", "-n", str(program)], check=True)


def test_each_worker_gets_its_own_check_timeout(rendered: tuple[Path, list[Any]]) -> None:
    """slurm_health_check_timeout (default 15, per worker) bounds each device's check."""
    out = rendered[0]
    for name in HEALTH_WORKERS:
        assert _setting((out / f"{name}.sh").read_text(), "check_timeout") == "check_timeout=15"
    hung = (out / "hungnode.sh").read_text()
    assert _setting(hung, "check_timeout") == f"check_timeout={HUNG_TIMEOUT}"
    assert 'timeout "$check_timeout" "$gpulab" health' in hung


def test_a_second_run_changes_nothing(rendered: tuple[Path, list[Any]]) -> None:
    first, second = rendered[1]
    assert all(host["changed"] == 1 for host in first.values()), first  # slurm.conf or program
    assert all(host["changed"] == 0 for host in second.values()), second


def test_no_worker_with_the_check_leaves_slurm_conf_without_it(
    tmp_path: Path,
) -> None:
    off = {name: spec | {"vars": {"slurm_health_check": False}} for name, spec in WORKERS.items()}
    out, _ = _render(tmp_path, off)
    assert _health_lines((out / "slurm.conf").read_text()) == []
    assert not list(out.glob("*.sh"))


def _program(
    rendered: tuple[Path, list[Any]], node: str = "labnode", **env: str
) -> subprocess.CompletedProcess[str]:
    """A node's program on this machine's lavapipe; no Slurm here, so sinfo cannot answer."""
    return subprocess.run(
        [str(rendered[0] / f"{node}.sh")],
        capture_output=True, text=True, timeout=120, check=False, env=os.environ | env,
    )  # fmt: skip


def test_the_program_passes_on_a_healthy_device(rendered: tuple[Path, list[Any]]) -> None:
    done = _program(rendered)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def test_a_failing_check_without_slurmctld_says_it_could_not_drain(
    rendered: tuple[Path, list[Any]],
) -> None:
    done = _program(rendered, VK_ICD_FILENAMES="/nonexistent.json", VK_DRIVER_FILES="/none.json")
    assert done.returncode == 1
    assert done.stdout == (
        "gpulab-health: device: the Vulkan loader found no compatible driver (device 0); "
        "slurmctld did not answer, labnode is not drained (next check tries again)\n"
    )


def test_a_device_that_does_not_answer_in_time_fails_the_check(
    rendered: tuple[Path, list[Any]],
) -> None:
    """The hung node's gpulab never answers: its check ends after slurm_health_check_timeout."""
    started = time.monotonic()
    done = _program(rendered, "hungnode")
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert done.stdout == (
        f"gpulab-health: device: no answer within {HUNG_TIMEOUT} s (device 0); "
        "slurmctld did not answer, hungnode is not drained (next check tries again)\n"
    )
    assert took < 15, f"the check took {took:.1f} s: not bounded by its {HUNG_TIMEOUT} s"
