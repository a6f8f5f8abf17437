"""gpulab.cluster.slurm_conf_change on the slurm role's files as the lab cluster has them
(tests/collection/fixtures/slurm-conf: slurm.conf, plugins.conf and nodes.conf copied from the
controller of a converged molecule `rollout` cluster, Slurm 22.05; gres.conf as the role writes it
for the Jetson stand-in, which that cluster lacks): each change gets the daemon action that Slurm
documents for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpulab.cluster.plugins.filter.slurm_conf_changes import (
    FilterModule,
    parse_slurm_conf,
    slurm_conf_change,
)

FIXTURES = Path(__file__).parent / "fixtures/slurm-conf"
FILES = ("slurm.conf", "plugins.conf", "nodes.conf", "gres.conf")


def lab_files() -> dict[str, str]:
    return {name: (FIXTURES / name).read_text() for name in FILES}


def changed(name: str, old: str, new: str, release: str = "22.05") -> dict[str, object]:
    """The filter's answer when one line of one lab file is replaced."""
    before = lab_files()
    assert old in before[name], f"{old!r} is not in the lab's {name}"
    after = dict(before, **{name: before[name].replace(old, new, 1)})
    return slurm_conf_change(before, after, release)


def test_the_same_files_need_nothing() -> None:
    assert slurm_conf_change(lab_files(), lab_files(), "22.05") == {
        "action": "none",
        "restart": [],
        "reconfigure": False,
        "reasons": [],
    }


def test_comments_blank_lines_and_order_need_nothing() -> None:
    before = lab_files()
    lines = before["plugins.conf"].splitlines()
    after = dict(before, **{"plugins.conf": "# another header\n\n" + "\n".join(reversed(lines))})
    assert slurm_conf_change(before, after)["action"] == "none"


@pytest.mark.parametrize(
    ("name", "old", "new", "reason"),
    [
        (
            "nodes.conf",
            "RealMemory=2048 Features=fp64",
            "RealMemory=1900 Features=fp64",
            "node worker1: realmemory changed (2048 -> 1900)",
        ),
        (
            "nodes.conf",
            "CPUs=2 RealMemory=2048 Features=fp64",
            "CPUs=2 RealMemory=2048 Weight=5 Features=fp64",
            "node worker1: weight changed (unset -> 5)",
        ),
        (
            "nodes.conf",
            "Features=fp64,",
            "Features=big,fp64,",
            "node worker1: features changed"
            " (fp64,llvmpipe,subgroup8,vulkan1.3 -> big,fp64,llvmpipe,subgroup8,vulkan1.3)",
        ),
        (
            "nodes.conf",
            "MaxTime=INFINITE",
            "MaxTime=1:00:00",
            "partition main: maxtime changed (INFINITE -> 1:00:00)",
        ),
        (
            "nodes.conf",
            "\n\n",
            "\n\nPartitionName=debug Nodes=worker1 MaxTime=30 State=UP\n",
            "partition debug added",
        ),
        (
            "slurm.conf",
            "DefMemPerCPU=512",
            "DefMemPerCPU=2048",
            "defmempercpu changed (512 -> 2048)",
        ),
        (
            "slurm.conf",
            "HealthCheckInterval=300",
            "HealthCheckInterval=60",
            "healthcheckinterval changed (300 -> 60)",
        ),
        ("plugins.conf", "MpiDefault=none", "MpiDefault=pmix", "mpidefault changed (none -> pmix)"),
    ],
)
def test_changes_that_a_reconfigure_applies(name: str, old: str, new: str, reason: str) -> None:
    assert changed(name, old, new) == {
        "action": "reconfigure",
        "restart": [],
        "reconfigure": True,
        "reasons": [reason],
    }


@pytest.mark.parametrize(
    ("name", "old", "new", "reason"),
    [
        (
            "plugins.conf",
            "AuthType=auth/munge",
            "AuthType=auth/slurm",
            "authtype changed (auth/munge -> auth/slurm)",
        ),
        (
            "plugins.conf",
            "SlurmctldPort=6817",
            "SlurmctldPort=7817",
            "slurmctldport changed (6817 -> 7817)",
        ),
        ("plugins.conf", "SlurmdPort=6818", "SlurmdPort=7818", "slurmdport changed (6818 -> 7818)"),
        (
            "plugins.conf",
            "SelectType=select/cons_tres",
            "SelectType=select/linear",
            "selecttype changed (select/cons_tres -> select/linear)",
        ),
        (
            "plugins.conf",
            "TaskPlugin=task/none",
            "TaskPlugin=task/cgroup,task/affinity",
            "taskplugin changed (task/none -> task/cgroup,task/affinity)",
        ),
        (
            "plugins.conf",
            "ProctrackType=proctrack/linuxproc",
            "ProctrackType=proctrack/cgroup",
            "proctracktype changed (proctrack/linuxproc -> proctrack/cgroup)",
        ),
        (
            "plugins.conf",
            "MpiDefault=none\n",
            "MpiDefault=none\nGresTypes=gpu\n",
            "grestypes changed (unset -> gpu)",
        ),
        (
            "slurm.conf",
            "SlurmctldHost=controller1",
            "SlurmctldHost=controller1\nSlurmctldHost=controller2",
            "slurmctldhost changed (controller1 -> controller1,controller2)",
        ),
        (
            "slurm.conf",
            "StateSaveLocation=/var/lib/slurm/slurmctld",
            "StateSaveLocation=/srv/gpulab/slurmctld",
            "statesavelocation changed (/var/lib/slurm/slurmctld -> /srv/gpulab/slurmctld)",
        ),
        (
            "slurm.conf",
            "ClusterName=gpulab\n",
            "ClusterName=gpulab\nPluginDir=/opt/slurm/lib\n",
            "plugindir changed (unset -> /opt/slurm/lib)",
        ),
        ("nodes.conf", "worker1 CPUs=2", "worker1 CPUs=4", "node worker1: cpus changed (2 -> 4)"),
        (
            "nodes.conf",
            "NodeName=worker2 CPUs=2 RealMemory=2048",
            "NodeName=worker2 CPUs=2 RealMemory=2048 Gres=gpu:orin:1",
            "node worker2: gres changed (unset -> gpu:orin:1)",
        ),
        (
            "nodes.conf",
            "\n\nPartitionName",
            "\nNodeName=worker3 CPUs=2 RealMemory=2048 State=UNKNOWN\n\nPartitionName",
            "node worker3 added",
        ),
    ],
)
def test_changes_that_restart_both_daemons(name: str, old: str, new: str, reason: str) -> None:
    assert changed(name, old, new) == {
        "action": "restart",
        "restart": ["slurmctld", "slurmd"],
        "reconfigure": False,
        "reasons": [reason],
    }


def test_slurm_24_11_adds_a_node_with_a_reconfigure() -> None:
    new_node = "\nNodeName=worker3 CPUs=2 State=UNKNOWN\n\nPartitionName"
    answer = changed("nodes.conf", "\n\nPartitionName", new_node, "24.11")
    assert answer["action"] == "reconfigure"
    assert answer["reasons"] == ["node worker3 added"]


def test_a_removed_node_needs_restarts_before_23_11() -> None:
    before = lab_files()
    lines = before["nodes.conf"].splitlines()
    nodes = "\n".join(line for line in lines if not line.startswith("NodeName=worker2"))
    after = dict(before, **{"nodes.conf": nodes.replace("Nodes=worker1,worker2", "Nodes=worker1")})
    answer = slurm_conf_change(before, after, "22.05")
    assert answer["restart"] == ["slurmctld", "slurmd"]
    assert answer["reasons"] == [
        "node worker2 removed",
        "partition main: nodes changed (worker1,worker2 -> worker1)",
    ]


def test_gres_conf_restarts_slurmd_only() -> None:
    answer = changed("gres.conf", "File=/dev/nvhost-ctrl-gpu", "File=/dev/nvgpu/igpu0/ctrl")
    assert answer == {
        "action": "restart",
        "restart": ["slurmd"],
        "reconfigure": False,
        "reasons": ["gres.conf changed (slurmd reads it at its start)"],
    }


def test_cgroup_conf_appearing_restarts_slurmd_and_a_partition_change_still_reconfigures() -> None:
    before = lab_files()
    after = dict(before, **{"cgroup.conf": "ConstrainCores=yes\nConstrainDevices=yes\n"})
    after["nodes.conf"] = before["nodes.conf"].replace("MaxTime=INFINITE", "MaxTime=2:00:00")
    answer = slurm_conf_change(before, after)
    assert answer["restart"] == ["slurmd"]
    assert answer["reconfigure"] is True  # slurmctld does not restart: it must re-read
    assert answer["reasons"] == [
        "cgroup.conf changed (slurmd reads it at its start)",
        "partition main: maxtime changed (INFINITE -> 2:00:00)",
    ]


def test_a_restart_covers_the_reconfigure() -> None:
    before = lab_files()
    after = dict(before)
    after["plugins.conf"] = before["plugins.conf"].replace("select/cons_tres", "select/linear")
    after["nodes.conf"] = before["nodes.conf"].replace("MaxTime=INFINITE", "MaxTime=2:00:00")
    answer = slurm_conf_change(before, after)
    assert answer["restart"] == ["slurmctld", "slurmd"]
    assert answer["reconfigure"] is False
    assert len(answer["reasons"]) == 2


def test_fresh_files_are_a_restart_of_what_runs() -> None:
    assert slurm_conf_change({}, lab_files())["action"] == "restart"


# A slurm.conf in SchedMD's style (one file, comments after values, a continued line).
SCHEDMD_STYLE = """\
SlurmctldHost=head(10.0.0.1)
AuthType=auth/munge   # munge everywhere
SelectType=select/cons_tres
NodeName=DEFAULT CPUs=64 RealMemory=250000 \\
    State=UNKNOWN
NodeName=gpu[01-04] Gres=gpu:h200:8 Feature="h200,nvlink"
PartitionName=gpu Nodes=gpu[01-04] Default=YES MaxTime=2-00:00:00
"""


def test_parse_reads_continuations_quotes_and_trailing_comments() -> None:
    settings, entities = parse_slurm_conf(SCHEDMD_STYLE)
    assert settings == {
        "slurmctldhost": "head(10.0.0.1)",
        "authtype": "auth/munge",
        "selecttype": "select/cons_tres",
    }
    assert entities[("nodename", "DEFAULT")] == {
        "cpus": "64",
        "realmemory": "250000",
        "state": "UNKNOWN",
    }
    assert entities[("nodename", "gpu[01-04]")] == {"gres": "gpu:h200:8", "feature": "h200,nvlink"}
    assert entities[("partitionname", "gpu")]["maxtime"] == "2-00:00:00"


def test_node_defaults_with_another_cpu_layout_restart() -> None:
    answer = slurm_conf_change(
        {"slurm.conf": SCHEDMD_STYLE}, {"slurm.conf": SCHEDMD_STYLE.replace("CPUs=64", "CPUs=128")}
    )
    assert answer["restart"] == ["slurmctld", "slurmd"]
    assert answer["reasons"] == ["node DEFAULT: cpus changed (64 -> 128)"]


def test_the_filter_is_registered() -> None:
    assert FilterModule().filters()["slurm_conf_change"] is slurm_conf_change
