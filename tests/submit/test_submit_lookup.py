"""sbatch's answer lost (a timeout, a dropped connection): the job is looked for by its tag
before gpulab says anything, through a fake transport and a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulab.submit import (
    CommandResult,
    JobOptions,
    MaybeQueued,
    NothingQueued,
    SubmitRejected,
    SubmittedJob,
    Unreachable,
    prepare,
    submit,
)
from gpulab.submit.lookup import ABSENT_LOOKS, LOOKUP_GAP_S, LOOKUP_PATIENCE_S, JobTag

from tests.submit.fakes import Answer, FakeClock, FakeTransport, dropped, ok

GRAPH = Path(__file__).resolve().parents[2] / "payload/examples/saxpy_norm.json"
JOB_DIR = "/srv/gpulab/jobs/saxpy-then-norm.Ab12Cd34"
TAG = "saxpy-then-norm.Ab12Cd34"
NAME = "gpulab-saxpy-then-norm"
SQUEUE = (
    "squeue",
    "--noheader",
    "--me",
    "--states=all",
    f"--name={NAME}",
    "--format=%i|%T|%Z|%k",
)
SACCT = (
    "sacct",
    "--noheader",
    "--parsable2",
    "--allocations",
    f"--name={NAME}",
    "--starttime=now-1days",
    "--format=JobID,State,WorkDir,Comment",
)
TIMED_OUT = ok(
    stderr="sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n",
    code=1,
)
NO_CONTROLLER = ok(
    stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
    code=1,
)
NO_ACCOUNTING = ok(stderr="sacct: error: Slurm accounting storage is disabled\n", code=1)
LOST = (
    "sbatch's answer was lost (sbatch on fake-controller: Batch job submission failed: Socket "
    "timed out on send/recv operation)"
)
# Another submission of the same graph, queued earlier: same name, its own tag and folder.
OTHER = "4|RUNNING|/srv/gpulab/jobs/saxpy-then-norm.Zz99Yy88|saxpy-then-norm.Zz99Yy88\n"
OURS = f"5|PENDING|{JOB_DIR}|{TAG}\n"


def _cluster(sbatch: Answer, squeue: list[Answer], sacct: Answer = NO_ACCOUNTING) -> FakeTransport:
    return FakeTransport(
        {
            "mktemp": [ok(JOB_DIR + "\n")],
            "sbatch": [sbatch],
            "squeue": squeue,
            "sacct": [sacct],
            "rm": [ok()],
        }
    )


def _submit(transport: FakeTransport, clock: FakeClock, said: list[str]) -> SubmittedJob:
    return submit(
        transport,
        prepare(GRAPH),
        JobOptions(backend="cpu"),
        said.append,
        clock=clock.clock,
        sleep=clock.sleep,
    )


def test_a_timed_out_sbatch_whose_job_is_queued_carries_on_with_its_id() -> None:
    transport = _cluster(TIMED_OUT, [ok(OTHER + OURS)])
    clock, said = FakeClock(), []
    job = _submit(transport, clock, said)
    assert (job.job_id, job.tag, job.stdout) == ("5", TAG, f"{JOB_DIR}/slurm-5.out")
    assert transport.programs() == ["mktemp", "sbatch", "squeue"]
    assert transport.calls[2] == SQUEUE
    assert said == [
        f"{LOST}; looking for the job by its tag {TAG} for up to 60 s",
        f"found job 5 (PENDING) by its tag {TAG}: it was queued, though sbatch's answer was lost",
    ]
    assert clock.sleeps == []


def test_the_tag_is_the_comment_sbatch_sends() -> None:
    transport = _cluster(ok("5\n"), [])
    job = _submit(transport, FakeClock(), [])
    assert f"--comment={TAG}" in transport.calls[1]
    assert f"--job-name={NAME}" in transport.calls[1]
    assert job.to_json()["tag"] == TAG


def test_a_timed_out_sbatch_with_no_job_in_slurm_queued_nothing_and_removes_the_folder() -> None:
    transport = _cluster(TIMED_OUT, [ok(OTHER)])
    clock, said = FakeClock(), []
    with pytest.raises(NothingQueued) as failure:
        _submit(transport, clock, said)
    assert str(failure.value) == (
        f"{LOST} and Slurm has no job tagged {TAG}: nothing was queued and its folder is "
        "removed; submit again"
    )
    # Asked twice, a gap apart: slurmctld may handle the late request after the first look.
    assert transport.programs() == ["mktemp", "sbatch", "squeue", "sacct", "squeue", "sacct", "rm"]
    assert transport.calls[-1] == ("rm", "-rf", "--", JOB_DIR)
    assert clock.sleeps == [LOOKUP_GAP_S] * (ABSENT_LOOKS - 1)
    assert len(said) == 1


def test_a_controller_unreachable_throughout_may_have_queued_it() -> None:
    clock, said = FakeClock(), []

    def silent(argv: tuple[str, ...]) -> CommandResult:
        clock.now += 10  # squeue waits for MessageTimeout
        return NO_CONTROLLER(argv)

    transport = _cluster(TIMED_OUT, [silent])
    with pytest.raises(MaybeQueued) as failure:
        _submit(transport, clock, said)
    assert str(failure.value) == (
        f"{LOST} and the controller still did not answer after 60 s (squeue on fake-controller: "
        "slurm_load_jobs error: Unable to contact slurm controller (connect failure)): the job "
        f"MAY have been queued, tagged {TAG} (its comment; its folder {JOB_DIR}). Check before "
        "submitting again: squeue --noheader --me --states=all "
        f"--name={NAME} '--format=%i|%T|%Z|%k'"
    )
    # Bounded: each look 10 s and a gap, until 60 s had passed; the folder stays.
    assert transport.programs().count("squeue") == 5
    assert LOOKUP_PATIENCE_S <= clock.now < LOOKUP_PATIENCE_S + 10 + LOOKUP_GAP_S
    assert "rm" not in transport.programs()


def test_a_controller_back_after_a_while_finds_the_job() -> None:
    transport = _cluster(TIMED_OUT, [NO_CONTROLLER, NO_CONTROLLER, ok(OURS)])
    clock = FakeClock()
    assert _submit(transport, clock, []).job_id == "5"
    assert clock.sleeps == [LOOKUP_GAP_S, LOOKUP_GAP_S]


def test_a_job_slurmctld_queues_after_the_first_look_is_found_by_the_second() -> None:
    transport = _cluster(TIMED_OUT, [ok(""), ok(OURS)])
    assert _submit(transport, FakeClock(), []).job_id == "5"


def test_an_ssh_connection_dropped_after_sending_looks_the_job_up() -> None:
    transport = _cluster(dropped(), [ok(OURS)])
    said: list[str] = []
    assert _submit(transport, FakeClock(), said).job_id == "5"
    assert said[0].startswith(
        "sbatch's answer was lost (fake-controller: sbatch failed over SSH: Socket exception: "
        "Connection reset by peer (104)); looking for the job by its tag"
    )


def test_sbatch_exit_0_without_a_job_id_looks_the_job_up() -> None:
    transport = _cluster(ok("sbatch: warning: something\n"), [ok(OURS)])
    assert _submit(transport, FakeClock(), []).job_id == "5"


def test_accounting_finds_the_job_while_the_controller_is_silent() -> None:
    recorded = f"5|COMPLETED|{JOB_DIR}|\n"  # no AccountingStoreFlags=job_comment: no comment
    transport = _cluster(TIMED_OUT, [NO_CONTROLLER], sacct=ok(recorded))
    assert _submit(transport, FakeClock(), []).job_id == "5"
    assert transport.calls[-1] == SACCT


def test_a_job_whose_comment_a_plugin_rewrote_is_known_by_its_folder() -> None:
    transport = _cluster(TIMED_OUT, [ok(f"5|RUNNING|{JOB_DIR}|site-comment\n")])
    assert _submit(transport, FakeClock(), []).job_id == "5"


def test_squeue_output_that_is_no_job_list_is_no_answer() -> None:
    garbled = ok("squeue: error: something unexpected\n")
    transport = _cluster(TIMED_OUT, [garbled, garbled, ok(OURS)])
    assert _submit(transport, FakeClock(), []).job_id == "5"
    assert transport.programs().count("squeue") == 3


def test_a_refused_job_is_not_looked_up() -> None:
    refusal = "sbatch: error: Batch job submission failed: Invalid partition name specified"
    transport = _cluster(ok(stderr=refusal, code=1), [])
    with pytest.raises(SubmitRejected):
        _submit(transport, FakeClock(), [])
    assert transport.programs() == ["mktemp", "sbatch"]


def test_sbatch_missing_on_the_host_is_not_looked_up() -> None:
    def missing(argv: tuple[str, ...]) -> CommandResult:
        raise Unreachable("sbatch: not found on PATH on fake-controller")

    transport = _cluster(missing, [])
    with pytest.raises(Unreachable, match="not found on PATH") as failure:
        _submit(transport, FakeClock(), [])
    assert type(failure.value) is Unreachable
    assert transport.programs() == ["mktemp", "sbatch"]


def test_the_tag_marks_a_job_by_comment_or_folder() -> None:
    tag = JobTag(NAME, JOB_DIR)
    assert tag.tag == TAG
    assert tag.check_command == (
        f"squeue --noheader --me --states=all --name={NAME} '--format=%i|%T|%Z|%k'"
    )
