"""Slurm's argv and what its output says, pinned on output captured from Slurm 22.05."""

from __future__ import annotations

import json

import pytest
from gpulab.submit import JobState, SubmitRejected, Unreachable, slurm

from tests.submit.fakes import FakeTransport, ok

# `scontrol show job -o 8` for a job whose script exited 3 (abridged).
SCONTROL_FAILED = (
    "JobId=8 JobName=j.sh UserId=gpulab(2000) JobState=FAILED Reason=NonZeroExitCode "
    "Dependency=(null) ExitCode=3:0 RunTime=00:00:03 Partition=main ReqNodeList=(null) "
    "NodeList=worker1 BatchHost=worker1 Command=/tmp/j.sh WorkDir=/tmp StdErr=/tmp/slurm-8.out\n"
)


def test_sbatch_argv_is_pinned() -> None:
    argv = slurm.sbatch_argv(
        "/jobs/g.1/job.sh",
        job_dir="/jobs/g.1",
        job_name="gpulab-g",
        stdout="/jobs/g.1/slurm-%j.out",
        stderr="/jobs/g.1/slurm-%j.err",
        partition="gpu",
        nodelist="worker2",
    )
    assert argv == [
        "sbatch",
        "--parsable",
        "--job-name=gpulab-g",
        "--chdir=/jobs/g.1",
        "--output=/jobs/g.1/slurm-%j.out",
        "--error=/jobs/g.1/slurm-%j.err",
        "--partition=gpu",
        "--nodelist=worker2",
        "/jobs/g.1/job.sh",
    ]


def test_sbatch_argv_leaves_out_unset_placement() -> None:
    argv = slurm.sbatch_argv("s", job_dir="d", job_name="n", stdout="o", stderr="e")
    assert not any(word.startswith(("--partition", "--nodelist")) for word in argv)


@pytest.mark.parametrize(("answer", "job_id"), [("42\n", "42"), ("42;cluster\n", "42")])
def test_submit_job_reads_the_parsable_id(answer: str, job_id: str) -> None:
    transport = FakeTransport({"sbatch": [ok(answer)]})
    assert slurm.submit_job(transport, ["sbatch", "--parsable", "s"]) == job_id


def test_a_refused_job_is_bad_input_with_sbatchs_reason() -> None:
    refusal = "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    transport = FakeTransport({"sbatch": [ok(stderr=refusal, code=1)]})
    with pytest.raises(SubmitRejected) as refused:
        slurm.submit_job(transport, ["sbatch", "s"])
    assert str(refused.value) == (
        "sbatch refused the job: Batch job submission failed: Invalid partition name specified"
    )


def test_an_unreachable_controller_is_unreachable() -> None:
    message = "sbatch: error: Batch job submission failed: Unable to contact slurm controller\n"
    transport = FakeTransport({"sbatch": [ok(stderr=message, code=1)]})
    with pytest.raises(Unreachable, match=r"on fake-controller: .*Unable to contact"):
        slurm.submit_job(transport, ["sbatch", "s"])


def test_squeue_picks_the_job_by_id_from_every_listed_job() -> None:
    # 22.05's squeue --json lists every job even with --jobs.
    text = json.dumps(
        {
            "jobs": [
                {"job_id": 7, "job_state": "CANCELLED", "state_reason": "None", "nodes": "w1"},
                {"job_id": 8, "job_state": "PENDING", "state_reason": "Resources", "nodes": ""},
            ]
        }
    )
    assert slurm.parse_squeue(text, "8") == JobState("PENDING", "Resources", "")
    assert slurm.parse_squeue(text, "9") is None


def test_squeue_state_as_a_list_of_flags() -> None:
    # 24.11 gives the state as a list, the base state first.
    text = json.dumps({"jobs": [{"job_id": 8, "job_state": ["RUNNING"], "nodes": "worker1"}]})
    state = slurm.parse_squeue(text, "8")
    assert state is not None
    assert state.describe() == "RUNNING on worker1"


def test_scontrol_gives_state_exit_code_and_node() -> None:
    state = slurm.parse_scontrol(SCONTROL_FAILED)
    assert state == JobState("FAILED", "NonZeroExitCode", "worker1", exit_code=3)
    assert state.finished
    assert not state.succeeded
    assert state.describe() == "FAILED on worker1 (exit code 3)"


def test_scontrol_signal_and_unassigned_nodes() -> None:
    state = slurm.parse_scontrol("JobId=9 JobState=CANCELLED ExitCode=0:15 NodeList=(null)")
    assert state == JobState("CANCELLED", "", "", exit_code=0, signal=15)
    assert state.describe() == "CANCELLED (signal 15)"


def test_sacct_text_form_with_its_exit_code() -> None:
    assert slurm.parse_sacct("8|FAILED|3:0|worker1\n", "8") == JobState(
        "FAILED", "", "worker1", exit_code=3
    )
    assert slurm.parse_sacct("8|CANCELLED by 2000|0:0|worker2\n", "8") == JobState(
        "CANCELLED", "", "worker2", exit_code=0
    )
    assert slurm.parse_sacct("", "8") is None


def test_final_state_asks_the_controller_first_then_accounting() -> None:
    transport = FakeTransport(
        {
            "scontrol": [ok(stderr="slurm_load_jobs error: Invalid job id specified", code=1)],
            "sacct": [ok("8|COMPLETED|0:0|worker2\n")],
        }
    )
    state = slurm.final_state(transport, "8")
    assert state == JobState("COMPLETED", "", "worker2", exit_code=0)
    assert transport.calls == [
        ("scontrol", "show", "job", "-o", "8"),
        (
            "sacct",
            "--parsable2",
            "--noheader",
            "--allocations",
            "--format=JobID,State,ExitCode,NodeList",
            "--jobs=8",
        ),
    ]


def test_final_state_is_none_while_accounting_lags() -> None:
    transport = FakeTransport(
        {
            "scontrol": [ok(stderr="Invalid job id specified", code=1)],
            "sacct": [ok("8|RUNNING|0:0|worker2\n")],
        }
    )
    assert slurm.final_state(transport, "8") is None
