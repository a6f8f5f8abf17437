"""gres.conf, nodes.conf and plugins.conf as the slurm role renders them from real
gpulab.cluster.vulkan_facts runs: a 2-GPU H200 node whose GPUs are also offered as 4 shards
each (slurm_gpu_shards), a JetPack 6 Orin and a lavapipe node.

One ansible-playbook run on local hosts (no podman): on each worker the module runs against a
recorded vulkaninfo (tests/collection/fixtures, a script printing them), a directory of
device files named as under /dev and, on the Orin, an nv_tegra_release; then the slurm
role's facts.yml and its templates. The three hosts share this machine, so a tiny test-only
module gives each the hostname a real node would report (the stand-in for what one machine
cannot be). A second run changes nothing: the lists are sorted, so converges are idempotent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.roles.playbook import ROOT, run_playbook

FIXTURES = ROOT / "tests/collection/fixtures"
ORIN_RECORDING = ROOT / "lab/standin/jetson/vulkaninfo"
TEMPLATES = ROOT / "roles/slurm/templates"
CONFIGS = ("gres.conf", "nodes.conf", "plugins.conf")

# Per worker: the vulkaninfo recordings, the device files and whether it is L4T.
WORKERS: dict[str, dict[str, Any]] = {
    "h200node": {
        "recording": "h200x2",
        "nodes": ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"],
        "tegra": False,
        "vars": {"slurm_node_features": ["fp64", "bigmem"], "slurm_gpu_shards": 4},
    },
    "orinnode": {
        "recording": "orin",
        "nodes": ["nvmap", "nvhost-ctrl-gpu", "nvhost-gpu", "nvgpu/igpu0/ctrl",
                  "nvgpu/igpu0/as", "dri/renderD128"],
        "tegra": True,
        "vars": {},
    },
    "labnode": {"recording": "lavapipe", "nodes": ["dri/renderD128"], "tegra": False, "vars": {}},
}  # fmt: skip

# A module that reports the hostname it is given, as setup would on a real node.
HOSTNAME_MODULE = """\
#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={"name": {"type": "str", "required": True}})
module.exit_json(changed=False, ansible_facts={"hostname": module.params["name"]})
"""


def _worker(work: Path, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The recorded vulkaninfo, /dev and tegra release of one worker; its host variables."""
    home = work / name
    for node in spec["nodes"]:
        (home / "dev" / node).parent.mkdir(parents=True, exist_ok=True)
        (home / "dev" / node).touch()
    if spec["recording"] == "orin":  # the lab's Jetson stand-in recording, both outputs
        vulkaninfo = ORIN_RECORDING
    else:
        vulkaninfo = home / "vulkaninfo"
        summary = FIXTURES / f"vulkaninfo-summary-{spec['recording']}.txt"
        full = FIXTURES / f"vulkaninfo-{spec['recording']}.txt"
        vulkaninfo.write_text(
            f'#!/bin/sh\nif [ "$1" = --summary ]; then cat {summary}; else cat {full}; fi\n'
        )
        vulkaninfo.chmod(0o755)
    release = home / "nv_tegra_release"
    if spec["tegra"]:
        release.write_text("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic\n")
    return {
        "test_vulkaninfo": str(vulkaninfo),
        "test_dev_dir": str(home / "dev"),
        "test_tegra_release": str(release),
        **spec["vars"],
    }


# Each host reports its hostname, and each worker reads its recorded Vulkan devices.
READ_DEVICES: list[dict[str, Any]] = [
    {"name": "Report the node's hostname", "fake_hostname": {"name": "{{ inventory_hostname }}"}},
    {
        "name": "Read the Vulkan devices",
        "when": "inventory_hostname in groups.workers",
        "gpulab.cluster.vulkan_facts": {
            "vulkaninfo": "{{ test_vulkaninfo }}",
            "dev_dir": "{{ test_dev_dir }}",
            "tegra_release": "{{ test_tegra_release }}",
        },
    },
]


def _playbook(out: Path) -> list[dict[str, Any]]:
    return [
        {
            "name": "Read the devices and describe the nodes",
            "hosts": "all",
            "gather_facts": False,
            "tasks": [
                *READ_DEVICES,
                {"name": "Describe the node", "ansible.builtin.include_role": {
                    "name": "slurm", "tasks_from": "facts", "public": True}},
                {"name": "Render the configuration", "run_once": True,
                 "ansible.builtin.template": {"src": f"{TEMPLATES}/{{{{ item }}}}.j2",
                                              "dest": f"{out}/{{{{ item }}}}", "mode": "0644"},
                 "loop": list(CONFIGS)},
            ],
        }
    ]  # fmt: skip


def _inventory(work: Path) -> dict[str, Any]:
    local = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "slurm_node_cpus": 2,
        "slurm_node_real_memory": 2048,
        "slurm_cgroups": "disabled",
    }
    workers = {name: local | _worker(work, name, spec) for name, spec in WORKERS.items()}
    return {
        "all": {
            "hosts": {"ctlnode": local, **workers},
            "children": {
                "controller": {"hosts": {"ctlnode": {}}},
                "workers": {"hosts": {name: {} for name in WORKERS}},
            },
        }
    }


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list[Any]]:
    """Each configuration file's text, and the stats of both runs."""
    work = tmp_path_factory.mktemp("gres")
    out = work / "out"
    out.mkdir()
    (work / "library").mkdir()
    (work / "library/fake_hostname.py").write_text(HOSTNAME_MODULE)
    (work / "hosts.json").write_text(json.dumps(_inventory(work)))
    (work / "play.yml").write_text(yaml.safe_dump(_playbook(out), sort_keys=False))
    stats = [run_playbook(work, ANSIBLE_LIBRARY=str(work / "library"))["stats"] for _ in range(2)]
    return {name: (out / name).read_text() for name in CONFIGS}, stats


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_gres_conf_has_one_line_per_gpu_and_none_for_lavapipe(
    rendered: tuple[dict[str, str], list[Any]],
) -> None:
    assert _lines(rendered[0]["gres.conf"]) == [
        "NodeName=h200node Name=gpu Type=h200 File=/dev/nvidia0",
        "NodeName=h200node Name=gpu Type=h200 File=/dev/nvidia1",
        "NodeName=h200node Name=shard Count=4 File=/dev/nvidia0",
        "NodeName=h200node Name=shard Count=4 File=/dev/nvidia1",
        "NodeName=orinnode Name=gpu Type=orin File=/dev/nvgpu/igpu0/ctrl",
    ]


def test_nodes_carry_their_gres_and_the_union_of_features(
    rendered: tuple[dict[str, str], list[Any]],
) -> None:
    nodes = [line for line in _lines(rendered[0]["nodes.conf"]) if line.startswith("NodeName=")]
    assert nodes == [
        "NodeName=h200node CPUs=2 RealMemory=2048 Gres=gpu:h200:2,shard:8"
        " Features=bigmem,fp64,h200,subgroup32,vulkan1.4 State=UNKNOWN",
        "NodeName=orinnode CPUs=2 RealMemory=2048 Gres=gpu:orin:1"
        " Features=fp64,orin,subgroup32,vulkan1.3 State=UNKNOWN",
        "NodeName=labnode CPUs=2 RealMemory=2048"
        " Features=fp64,llvmpipe,subgroup8,vulkan1.3 State=UNKNOWN",
    ]


def test_slurm_is_told_about_the_gpu_and_shard_gres_types(
    rendered: tuple[dict[str, str], list[Any]],
) -> None:
    assert "GresTypes=gpu,shard" in _lines(rendered[0]["plugins.conf"])


def test_a_second_run_changes_nothing(rendered: tuple[dict[str, str], list[Any]]) -> None:
    first, second = rendered[1]
    assert first["ctlnode"]["changed"] == 1  # the one template task, all files written
    assert all(host["changed"] == 0 for host in second.values()), second


# A module that reports the service manager it is given, as setup would (PID 1's name).
SERVICE_MGR_MODULE = """\
#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={"name": {"type": "str", "required": True}})
module.exit_json(changed=False, ansible_facts={"service_mgr": module.params["name"]})
"""


def test_cgroup_conf_ignores_systemd_only_where_pid_1_is_not_systemd(tmp_path: Path) -> None:
    # Found on the device machine (no systemd, cgroup v2): cgroup/v2 asks systemd over D-Bus for
    # a scope unless IgnoreSystemd=yes, and slurmd cannot start its steps.
    (tmp_path / "library").mkdir()
    (tmp_path / "library/fake_service_mgr.py").write_text(SERVICE_MGR_MODULE)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    managers = {"systemdhost": "systemd", "barehost": "service"}
    hosts = {name: local | {"test_service_mgr": mgr} for name, mgr in managers.items()}
    (tmp_path / "hosts.json").write_text(json.dumps({"all": {"hosts": hosts}}))
    play = [{
        "name": "Render cgroup.conf", "hosts": "all", "gather_facts": False,
        "tasks": [
            {"name": "Report the service manager",
             "fake_service_mgr": {"name": "{{ test_service_mgr }}"}},
            {"name": "Render", "ansible.builtin.template": {
                "src": f"{TEMPLATES}/cgroup.conf.j2",
                "dest": f"{tmp_path}/{{{{ inventory_hostname }}}}.conf", "mode": "0644"}},
        ],
    }]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    run_playbook(tmp_path, ANSIBLE_LIBRARY=str(tmp_path / "library"))
    systemd_host = _lines((tmp_path / "systemdhost.conf").read_text())
    bare_host = _lines((tmp_path / "barehost.conf").read_text())
    assert "IgnoreSystemd=yes" not in systemd_host
    assert "ConstrainDevices=yes" in systemd_host
    assert bare_host == [*systemd_host, "IgnoreSystemd=yes"]
