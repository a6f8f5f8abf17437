"""Slurm's commands through a Transport: which command runs when, and what its failures mean.
How their output reads is tests/submit/test_slurm_client.py's."""

from __future__ import annotations

import pytest
from gpulab.submit import JobState, SubmitRejected, Unreachable, slurm

from tests.submit.fakes import Answer, FakeTransport, dropped, ok


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


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            ok(
                stderr="sbatch: error: Batch job submission failed: Socket timed out on send/recv "
                "operation\n",
                code=1,
            ),
            "sbatch on fake-controller: Batch job submission failed: Socket timed out on "
            "send/recv operation",
        ),
        (
            ok(
                stderr="sbatch: error: Batch job submission failed: Unable to contact slurm "
                "controller (connect failure)\n",
                code=1,
            ),
            "sbatch on fake-controller: Batch job submission failed: Unable to contact slurm "
            "controller (connect failure)",
        ),
        (
            dropped("the connection dropped while it ran"),
            "fake-controller: sbatch failed over SSH: the connection dropped while it ran",
        ),
        (ok(""), "sbatch on fake-controller answered ''"),
    ],
)
def test_an_answer_that_may_hide_a_queued_job_is_lost(answer: Answer, message: str) -> None:
    transport = FakeTransport({"sbatch": [answer]})
    with pytest.raises(slurm.AnswerLost) as lost:
        slurm.submit_job(transport, ["sbatch", "s"])
    assert str(lost.value) == message


def test_partition_gpus_asks_sinfo_for_the_partitions_gres() -> None:
    transport = FakeTransport({"sinfo": [ok("gpu gpu:h200:1\n")]})
    assert slurm.partition_gpus(transport, "gpu") == 1
    assert transport.calls == [("sinfo", "--noheader", "--format=%P %G", "--partition=gpu")]


def test_partition_gpus_of_an_unreachable_controller() -> None:
    message = "slurm_load_partitions: Unable to contact slurm controller (connect failure)\n"
    transport = FakeTransport({"sinfo": [ok(stderr=message, code=1)]})
    with pytest.raises(Unreachable, match=r"^sinfo on fake-controller: slurm_load_partitions"):
        slurm.partition_gpus(transport, None)


def test_last_state_asks_the_controller_first_then_accounting() -> None:
    transport = FakeTransport(
        {
            "scontrol": [ok(stderr="slurm_load_jobs error: Invalid job id specified", code=1)],
            "sacct": [ok("8|COMPLETED|0:0|12|worker2\n")],
        }
    )
    state = slurm.last_state(transport, "8")
    assert state == JobState(
        "COMPLETED", "", "worker2", exit_code=0, signal=0, job_id="8", elapsed=12
    )
    assert transport.calls == [
        ("scontrol", "show", "job", "-o", "8"),
        (
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            "--format=JobID,State,ExitCode,ElapsedRaw,NodeList",
            "--jobs=8",
        ),
    ]


def test_last_state_is_unfinished_while_accounting_lags() -> None:
    transport = FakeTransport(
        {
            "scontrol": [ok(stderr="Invalid job id specified", code=1)],
            "sacct": [ok("8|RUNNING|0:0|3|worker2\n")],
        }
    )
    state = slurm.last_state(transport, "8")
    assert state is not None
    assert (state.state, state.finished) == ("RUNNING", False)


def test_last_state_is_none_when_slurm_has_no_record() -> None:
    transport = FakeTransport(
        {"scontrol": [ok(stderr="Invalid job id specified", code=1)], "sacct": [ok("")]}
    )
    assert slurm.last_state(transport, "8") is None


def test_last_state_of_a_submission_slurmctld_lost_is_none() -> None:
    """slurmctld killed right after a submission (faults drill, 6 Dec): accounting keeps the
    job PENDING, the controller never knew it after its restart; it will never run, so it is
    no record (wait counts it towards JobForgotten instead of waiting for ever)."""
    transport = FakeTransport(
        {
            "scontrol": [ok(stderr="Invalid job id specified", code=1)],
            "sacct": [ok("25|PENDING|0:0|0|None assigned\n")],
        }
    )
    assert slurm.last_state(transport, "25") is None
