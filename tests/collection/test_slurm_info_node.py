"""gpulab.cluster.slurm_info and slurm_node: the exact commands they run, how they read the
answers, idempotence, check mode and diff. The sinfo and squeue lines are in the formats
slurm_client asks for, as Slurm 22.05 (Debian 12) prints them: "none" for no reason, "(null)"
for no GRES, "*" after a default partition and after the state of a node that does not answer."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_client import (
    CommandResult,
    SlurmError,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import SlurmRunner
from ansible_collections.gpulab.cluster.plugins.modules import slurm_info, slurm_node
from ansible_collections.gpulab.cluster.plugins.modules.slurm_node import (
    SlurmNode,
    SlurmNodeError,
)

from .fakes import FakeRunner

SINFO_NODES = ["/usr/bin/sinfo", "--noheader", "--Node", "--format=%N|%T|%u|%G|%f|%P|%E"]
SINFO_PARTITIONS = ["/usr/bin/sinfo", "--noheader", "--format=%P|%a|%l|%D|%N"]
SQUEUE = ["/usr/bin/squeue", "--noheader", "--all", "--format=%i|%T|%P|%u|%D|%N|%r|%j"]
NODES = (
    "worker1|idle|Unknown|(null)|vulkan,lavapipe|main*|none\n"
    "worker1|idle|Unknown|(null)|vulkan,lavapipe|debug|none\n"
    "worker2|drained|root|gpu:orin:1|vulkan,jetson|main*|gpulab-health: device lost (device 0)\n"
    "worker3|down*|slurm|(null)|(null)|main*|Not responding\n"
    "worker4|mixed|Unknown|gpu:h200:2(S:0-1)|vulkan|main*|none\n"
)
PARTITIONS = (
    "main*|up|infinite|2|worker[1,4]\n"
    "main*|up|infinite|1|worker2\n"
    "main*|up|infinite|1|worker3\n"
    "debug|up|30:00|1|worker1\n"
    "empty|down|infinite|0|\n"
)
JOBS = (
    "42|RUNNING|main|gpulab|1|worker4|None|gpulab-validate-worker4\n"
    "43_1|PENDING|main|alice|2||Resources|sweep|with|bars\n"
)


def info_params(**given: Any) -> dict[str, Any]:
    values = {name: spec.get("default") for name, spec in slurm_info.ARGUMENT_SPEC.items()}
    values.update(given)
    return values


def node_params(**given: Any) -> dict[str, Any]:
    values = {name: spec.get("default") for name, spec in slurm_node.ARGUMENT_SPEC.items()}
    values.update(given)
    return values


def test_info_reads_nodes_partitions_and_jobs() -> None:
    runner = (
        FakeRunner()
        .expect(SINFO_NODES, stdout=NODES)
        .expect(SINFO_PARTITIONS, stdout=PARTITIONS)
        .expect(SQUEUE, stdout=JOBS)
    )
    result = slurm_info.read(info_params(), runner)
    assert result["changed"] is False
    nodes = {node["name"]: node for node in result["nodes"]}
    assert list(nodes) == ["worker1", "worker2", "worker3", "worker4"]
    assert nodes["worker1"] == {
        "name": "worker1",
        "state": "idle",
        "long_state": "idle",
        "responding": True,
        "healthy": True,
        "unavailable": False,
        "drained": False,
        "reason": "",
        "reason_user": "",
        "gres": "",
        "features": ["vulkan", "lavapipe"],
        "partitions": ["main", "debug"],
    }
    assert nodes["worker2"]["reason"] == "gpulab-health: device lost (device 0)"
    assert nodes["worker2"]["reason_user"] == "root"
    assert (nodes["worker2"]["healthy"], nodes["worker2"]["drained"]) == (False, True)
    assert nodes["worker3"]["state"] == "down"
    assert nodes["worker3"]["responding"] is False
    assert (nodes["worker3"]["unavailable"], nodes["worker3"]["reason_user"]) == (True, "slurm")
    assert nodes["worker4"]["healthy"] is True
    assert nodes["worker4"]["gres"] == "gpu:h200:2(S:0-1)"
    assert result["partitions"] == [
        {
            "name": "main",
            "default": True,
            "available": True,
            "time_limit": "infinite",
            "node_count": 4,
            "nodes": ["worker[1,4]", "worker2", "worker3"],
        },
        {
            "name": "debug",
            "default": False,
            "available": True,
            "time_limit": "30:00",
            "node_count": 1,
            "nodes": ["worker1"],
        },
        {
            "name": "empty",
            "default": False,
            "available": False,
            "time_limit": "infinite",
            "node_count": 0,
            "nodes": [],
        },
    ]
    assert result["jobs"][0] == {
        "job_id": "42",
        "state": "RUNNING",
        "partition": "main",
        "user": "gpulab",
        "node_count": 1,
        "nodes": "worker4",
        "reason": "",
        "name": "gpulab-validate-worker4",
    }
    assert result["jobs"][1]["name"] == "sweep|with|bars"
    assert (result["jobs"][1]["nodes"], result["jobs"][1]["reason"]) == ("", "Resources")


def test_info_restricted_to_nodes_asks_only_for_them() -> None:
    runner = (
        FakeRunner()
        .expect([*SINFO_NODES, "--nodes=worker1,worker2"], stdout=NODES.split("\n", 1)[0])
        .expect([*SQUEUE, "--nodelist=worker1,worker2"], stdout="")
    )
    result = slurm_info.read(
        info_params(gather=["nodes", "jobs"], nodes=["worker1", "worker2"]), runner
    )
    assert [node["name"] for node in result["nodes"]] == ["worker1"]
    assert result["jobs"] == []
    assert "partitions" not in result


def test_info_fails_in_one_line_when_slurmctld_does_not_answer() -> None:
    message = "slurm_load_node: Unable to contact slurm controller (connect failure)"
    runner = FakeRunner().expect(SINFO_NODES, rc=1, stderr=message + "\n")
    with pytest.raises(SlurmError, match=rf"^sinfo failed \(rc 1\): {re.escape(message)}$"):
        slurm_info.read(info_params(gather=["nodes"]), runner)


def test_info_refuses_output_that_is_no_node_list() -> None:
    runner = FakeRunner().expect(SINFO_NODES, stdout="sinfo: error: something\n")
    with pytest.raises(
        SlurmError, match=r"^sinfo: not a node of sinfo: 'sinfo: error: something'$"
    ):
        slurm_info.read(info_params(gather=["nodes"]), runner)


def test_info_without_sinfo_says_what_to_install() -> None:
    with pytest.raises(SlurmError, match=r"^sinfo not found on PATH: install the Slurm client"):
        slurm_info.read(info_params(gather=["nodes"]), FakeRunner(tools=()))


# --- slurm_node -------------------------------------------------------------------------


def sinfo_of(*names: str) -> list[str]:
    return [*SINFO_NODES, f"--nodes={','.join(names)}"]


def lines_of(*names: str) -> str:
    return "".join(line + "\n" for line in NODES.splitlines() if line.split("|")[0] in names)


def test_drain_runs_scontrol_update_with_the_reason() -> None:
    runner = (
        FakeRunner()
        .expect(sinfo_of("worker1", "worker4"), stdout=lines_of("worker1", "worker4"))
        .expect(
            [
                "/usr/bin/scontrol",
                "update",
                "nodename=worker1,worker4",
                "state=drain",
                "reason=gpulab upgrade",
            ]
        )
    )
    result = SlurmNode(
        node_params(name=["worker1", "worker4"], state="drained", reason="gpulab upgrade"), runner
    ).apply()
    assert result["changed"] is True
    assert result["changed_nodes"] == ["worker1", "worker4"]
    assert result["diff"]["before"]["worker1"] == {
        "drained": False,
        "unavailable": False,
        "reason": "",
    }
    assert result["diff"]["after"]["worker1"]["reason"] == "gpulab upgrade"
    assert not runner.script


def test_drain_again_with_the_same_reason_changes_nothing() -> None:
    reason = "gpulab-health: device lost (device 0)"
    runner = FakeRunner().expect(sinfo_of("worker2"), stdout=lines_of("worker2"))
    result = SlurmNode(
        node_params(name=["worker2"], state="drained", reason=reason), runner
    ).apply()
    assert (result["changed"], result["changed_nodes"]) == (False, [])
    assert "cmd" not in result


def test_drain_with_another_reason_replaces_it_unless_kept() -> None:
    runner = FakeRunner().expect(sinfo_of("worker2"), stdout=lines_of("worker2"))
    kept = SlurmNode(
        node_params(name=["worker2"], state="drained", reason="upgrade", keep_reason=True), runner
    ).apply()
    assert kept["changed"] is False
    runner.expect(sinfo_of("worker2"), stdout=lines_of("worker2")).expect(
        ["/usr/bin/scontrol", "update", "nodename=worker2", "state=drain", "reason=upgrade"]
    )
    replaced = SlurmNode(
        node_params(name=["worker2"], state="drained", reason="upgrade"), runner
    ).apply()
    assert replaced["changed_nodes"] == ["worker2"]


def test_check_mode_reads_and_predicts_but_changes_nothing() -> None:
    runner = FakeRunner().expect(sinfo_of("worker1"), stdout=lines_of("worker1"))
    result = SlurmNode(
        node_params(name=["worker1"], state="drained", reason="x"), runner, check_mode=True
    ).apply()
    assert result["changed"] is True
    assert result["cmd"] == [
        "/usr/bin/scontrol",
        "update",
        "nodename=worker1",
        "state=drain",
        "reason=x",
    ]
    assert [call.argv[0] for call in runner.calls] == ["/usr/bin/sinfo"]


def test_resume_takes_only_the_nodes_out_of_service() -> None:
    names = ("worker1", "worker2", "worker3", "worker4")
    runner = (
        FakeRunner()
        .expect(sinfo_of(*names), stdout=NODES)
        .expect(["/usr/bin/scontrol", "update", "nodename=worker2,worker3", "state=resume"])
    )
    result = SlurmNode(node_params(name=list(names), state="resumed"), runner).apply()
    assert result["changed_nodes"] == ["worker2", "worker3"]


def test_resume_of_nodes_in_service_changes_nothing() -> None:
    runner = FakeRunner().expect(sinfo_of("worker1"), stdout=lines_of("worker1"))
    result = SlurmNode(node_params(name=["worker1"], state="resumed"), runner).apply()
    assert result["changed"] is False
    assert len(runner.calls) == 1


def test_an_unknown_node_fails_in_one_line() -> None:
    runner = FakeRunner().expect(sinfo_of("worker1", "nope"), stdout=lines_of("worker1"))
    with pytest.raises(SlurmNodeError, match=r"^Slurm has no node nope$"):
        SlurmNode(node_params(name=["worker1", "nope"], state="resumed"), runner).apply()


def test_reconfigure_runs_every_time_and_not_in_check_mode() -> None:
    runner = FakeRunner().expect(["/usr/bin/scontrol", "reconfigure"])
    assert SlurmNode(node_params(state="reconfigured"), runner).apply()["changed"] is True
    assert not runner.script
    checked = SlurmNode(node_params(state="reconfigured"), runner, check_mode=True).apply()
    assert checked == {"changed": True, "cmd": ["/usr/bin/scontrol", "reconfigure"]}
    assert len(runner.calls) == 1


def test_a_failed_scontrol_fails_with_its_message() -> None:
    runner = (
        FakeRunner()
        .expect(sinfo_of("worker3"), stdout=lines_of("worker3"))
        .expect(
            ["/usr/bin/scontrol", "update", "nodename=worker3", "state=resume"],
            rc=1,
            stderr="slurm_update error: Invalid node state specified\n",
        )
    )
    with pytest.raises(
        SlurmError, match=r"^scontrol failed \(rc 1\): slurm_update error: Invalid node state"
    ):
        SlurmNode(node_params(name=["worker3"], state="resumed"), runner).apply()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"state": "resumed"}, "state=resumed needs name: the nodes to change"),
        (
            {"state": "reconfigured", "name": ["worker1"]},
            "state=reconfigured reconfigures the whole cluster: leave name out",
        ),
        (
            {"state": "resumed", "name": ["w"], "reason": "x"},
            "reason is for state=drained, not state=resumed",
        ),
        ({"state": "drained", "name": ["w"], "reason": "a\nb"}, "reason must be one line of text"),
        (
            {"state": "drained", "name": ["w"]},
            "state is drained but all of the following are missing: reason",
        ),
        (
            {"state": "gone", "name": ["w"]},
            "value of state must be one of: drained, resumed, reconfigured, got: gone",
        ),
    ],
)
def test_bad_arguments_fail_in_one_line(
    args: dict[str, Any],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(SlurmRunner, "which", lambda self, name: None)  # nothing may run
    with patch_module_args(args), pytest.raises(SystemExit):
        slurm_node.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True
    assert result["msg"] == message
    assert "\n" not in result["msg"]


def test_info_through_main_in_check_mode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SlurmRunner, "which", lambda self, name: f"/usr/bin/{name}")
    answers = {"/usr/bin/sinfo": NODES}
    monkeypatch.setattr(
        SlurmRunner,
        "run",
        lambda self, argv, stdin=None, env=None: CommandResult(
            tuple(argv), 0, answers[argv[0]], ""
        ),
    )
    with (
        patch_module_args({"gather": ["nodes"], "_ansible_check_mode": True}),
        pytest.raises(SystemExit),
    ):
        slurm_info.main()
    result = json.loads(capsys.readouterr().out)
    assert result["changed"] is False
    assert len(result["nodes"]) == 4


def test_the_runner_returns_the_payloads_command_result_type() -> None:
    from ansible_collections.gpulab.cluster.plugins.module_utils import (  # noqa: PLC0415
        slurm_client,
        slurm_runner,
    )

    assert slurm_runner.CommandResult is slurm_client.CommandResult
