"""gpulab.cluster.slurm_job: the exact commands it runs and how it reads their answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpulab.cluster.plugins.modules.slurm_job import (
    ARGUMENT_SPEC,
    SlurmJob,
    SlurmJobError,
)

from .fakes import FakeClock, FakeRunner

SCONTROL = ["/usr/bin/scontrol", "show", "job", "-o", "42"]


def params(**given: Any) -> dict[str, Any]:
    """Module parameters with the argument spec's defaults, as AnsibleModule gives them."""
    values = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    values.update(given)
    return values


def job_line(
    state: str,
    exit_code: str = "0:0",
    run_time: str = "00:00:00",
    stdout: str = "/home/gpulab/slurm-42.out",
) -> str:
    return (
        f"JobId=42 JobName=hello UserId=gpulab(2000) JobState={state} Reason=None "
        f"ExitCode={exit_code} "
        f"RunTime={run_time} NodeList=worker1 StdErr={stdout} StdIn=/dev/null StdOut={stdout}\n"
    )


def job(
    runner: FakeRunner, check_mode: bool = False, clock: FakeClock | None = None, **given: Any
) -> SlurmJob:
    clock = clock or FakeClock()
    return SlurmJob(params(**given), runner, check_mode=check_mode, clock=clock, sleep=clock.sleep)


def test_command_is_submitted_with_wrap_and_every_option() -> None:
    runner = (
        FakeRunner()
        .expect(
            [
                "/usr/bin/sbatch",
                "--parsable",
                "--job-name=hello",
                "--partition=main",
                "--nodelist=worker1",
                "--nodes=1",
                "--ntasks=2",
                "--gres=gpu:1",
                "--chdir=/home/gpulab",
                "--output=/home/gpulab/hello-%j.out",
                "--time=5",
                "--wrap=hostname -s",
            ],
            stdout="42\n",
        )
        .expect(SCONTROL, stdout=job_line("PENDING"))
    )
    result = job(
        runner,
        command="hostname -s",
        name="hello",
        partition="main",
        nodelist="worker1",
        nodes=1,
        ntasks=2,
        gres="gpu:1",
        chdir="/home/gpulab",
        output="/home/gpulab/hello-%j.out",
        sbatch_args=["--time=5"],
    ).apply()
    assert result == {
        "changed": True,
        "job_id": "42",
        "state": "PENDING",
        "exit_code": None,
        "signal": None,
        "elapsed": 0,
        "output_path": "/home/gpulab/slurm-42.out",
        "nodes": "worker1",
    }


def test_script_goes_on_stdin_with_the_environment() -> None:
    runner = FakeRunner().expect(["/usr/bin/sbatch", "--parsable"], stdout="42;gpulab\n")
    runner.expect(SCONTROL, stdout=job_line("RUNNING"))
    script = "#!/bin/sh\necho $GREETING\n"
    result = job(runner, script=script, environment={"GREETING": "hi", "N": 3}).apply()
    assert result["job_id"] == "42"
    assert runner.calls[0].stdin == script
    assert runner.calls[0].env == {"GREETING": "hi", "N": "3"}


def test_script_path_is_the_last_argument() -> None:
    runner = FakeRunner().expect(
        ["/usr/bin/sbatch", "--parsable", "--exclusive", "/opt/job.sh"], stdout="42\n"
    )
    runner.expect(SCONTROL, stdout=job_line("PENDING"))
    job(runner, script_path="/opt/job.sh", sbatch_args=["--exclusive"]).apply()
    assert runner.calls[0].stdin is None


def test_wait_polls_until_the_job_completes_and_reads_its_output(tmp_path: Path) -> None:
    out = tmp_path / "slurm-42.out"
    out.write_text("".join(f"line {i}\n" for i in range(30)))
    runner = FakeRunner().expect(["/usr/bin/sbatch", "--parsable", "--wrap=true"], stdout="42\n")
    runner.expect(SCONTROL, stdout=job_line("PENDING", stdout=str(out)))
    runner.expect(SCONTROL, stdout=job_line("RUNNING", stdout=str(out)))
    runner.expect(SCONTROL, stdout=job_line("COMPLETED", run_time="00:01:02", stdout=str(out)))
    clock = FakeClock()
    result = job(
        runner, clock=clock, command="true", wait=True, poll_interval=0.5, tail_lines=2
    ).apply()
    assert clock.sleeps == [0.25, 0.25]  # a quarter second, then a quarter of the time waited
    assert result["state"] == "COMPLETED"
    assert result["exit_code"] == 0
    assert result["elapsed"] == 62
    assert result["stdout_tail"] == "line 28\nline 29\n"
    assert "stderr_tail" not in result  # the same file as stdout


def test_a_failed_job_fails_with_its_state_and_exit_code() -> None:
    runner = FakeRunner().expect(["/usr/bin/sbatch", "--parsable", "--wrap=false"], stdout="42\n")
    runner.expect(SCONTROL, stdout=job_line("FAILED", exit_code="3:0"))
    with pytest.raises(SlurmJobError, match=r"^job 42 ended FAILED with exit code 3$") as failure:
        job(runner, command="false", wait=True).apply()
    assert failure.value.result["state"] == "FAILED"
    assert failure.value.result["exit_code"] == 3


def test_a_timed_out_job_reports_the_signal() -> None:
    runner = FakeRunner().expect(
        ["/usr/bin/sbatch", "--parsable", "--wrap=sleep 99"], stdout="42\n"
    )
    runner.expect(SCONTROL, stdout=job_line("TIMEOUT", exit_code="0:15"))
    with pytest.raises(SlurmJobError, match=r"ended TIMEOUT with exit code 0 \(signal 15\)"):
        job(runner, command="sleep 99", wait=True).apply()


def test_waiting_longer_than_timeout_fails_and_leaves_the_job() -> None:
    runner = FakeRunner().expect(
        ["/usr/bin/sbatch", "--parsable", "--wrap=sleep 99"], stdout="42\n"
    )
    # Checks at 0, 0.25, 0.5, 0.75, 1, 1.25, then a quarter of the time waited: 1.56, 1.95,
    # 2.44, 3.05, 3.81 and 4.77 s, past the timeout.
    for _ in range(12):
        runner.expect(SCONTROL, stdout=job_line("RUNNING"))
    clock = FakeClock()
    with pytest.raises(SlurmJobError, match=r"^job 42 still RUNNING after 4 s") as failure:
        job(
            runner, clock=clock, command="sleep 99", wait=True, timeout=4, poll_interval=2.0
        ).apply()
    assert clock.sleeps[:5] == [0.25] * 5
    waited = [sum(clock.sleeps[:i]) for i in range(5, len(clock.sleeps))]
    assert clock.sleeps[5:] == pytest.approx([w / 4 for w in waited])
    assert failure.value.result["job_id"] == "42"
    assert not runner.script


def test_a_short_job_is_seen_finished_within_a_quarter_second() -> None:
    runner = FakeRunner().expect(["/usr/bin/sbatch", "--parsable", "--wrap=true"], stdout="42\n")
    runner.expect(SCONTROL, stdout=job_line("RUNNING"))
    runner.expect(SCONTROL, stdout=job_line("COMPLETED"))
    clock = FakeClock()
    result = job(runner, clock=clock, command="true", wait=True).apply()
    assert clock.sleeps == [0.25]
    assert result["state"] == "COMPLETED"


def test_the_gap_between_checks_stops_growing_at_poll_interval() -> None:
    runner = FakeRunner().expect(
        ["/usr/bin/sbatch", "--parsable", "--wrap=sleep 99"], stdout="42\n"
    )
    for _ in range(40):  # more than the checks of 30 s
        runner.expect(SCONTROL, stdout=job_line("RUNNING"))
    clock = FakeClock()
    with pytest.raises(SlurmJobError, match=r"still RUNNING after 30 s"):
        job(
            runner, clock=clock, command="sleep 99", wait=True, timeout=30, poll_interval=2.0
        ).apply()
    assert clock.sleeps[-3:] == [2.0, 2.0, 2.0]
    assert max(clock.sleeps) == 2.0


def test_sbatch_errors_are_reported_with_their_text() -> None:
    runner = FakeRunner().expect(
        ["/usr/bin/sbatch", "--parsable", "--partition=nope", "--wrap=true"],
        rc=1,
        stderr="sbatch: error: invalid partition specified: nope\n",
    )
    with pytest.raises(SlurmJobError) as failure:
        job(runner, command="true", partition="nope").apply()
    assert (
        str(failure.value)
        == "sbatch failed (rc 1): sbatch: error: invalid partition specified: nope"
    )
    assert failure.value.result["rc"] == 1


def test_garbage_from_sbatch_is_an_error() -> None:
    runner = FakeRunner().expect(
        ["/usr/bin/sbatch", "--parsable", "--wrap=true"], stdout="Submitted?\n"
    )
    with pytest.raises(SlurmJobError, match="sbatch printed no job id"):
        job(runner, command="true").apply()


def test_missing_sbatch_says_what_to_install() -> None:
    runner = FakeRunner(tools=())
    with pytest.raises(SlurmJobError, match=r"^sbatch not found on PATH: install the Slurm client"):
        job(runner, command="true").apply()
    assert runner.calls == []


def test_check_mode_submits_nothing() -> None:
    runner = FakeRunner()
    result = job(runner, check_mode=True, command="true", wait=True).apply()
    assert result["changed"] is True
    assert result["job_id"] is None
    assert result["cmd"] == ["/usr/bin/sbatch", "--parsable", "--wrap=true"]
    assert runner.calls == []


SQUEUE = ["/usr/bin/squeue", "--noheader", "--me", "--name=nightly", "--format=%i %T"]


def test_present_keeps_a_running_job_of_that_name() -> None:
    runner = FakeRunner().expect(SQUEUE, stdout="42 RUNNING\n")
    runner.expect(SCONTROL, stdout=job_line("RUNNING"))
    result = job(runner, state="present", name="nightly", command="true").apply()
    assert result["changed"] is False
    assert result["job_id"] == "42"


def test_present_submits_when_no_job_of_that_name_runs() -> None:
    runner = FakeRunner().expect(SQUEUE, stdout="")
    runner.expect(
        ["/usr/bin/sbatch", "--parsable", "--job-name=nightly", "--wrap=true"], stdout="42\n"
    )
    runner.expect(SCONTROL, stdout=job_line("PENDING"))
    assert job(runner, state="present", name="nightly", command="true").apply()["changed"] is True


def test_present_in_check_mode_only_looks() -> None:
    runner = FakeRunner().expect(SQUEUE, stdout="")
    result = job(runner, check_mode=True, state="present", name="nightly", command="true").apply()
    assert result["changed"] is True
    assert [call.argv[0] for call in runner.calls] == ["/usr/bin/squeue"]


def test_absent_cancels_every_active_job_of_that_name() -> None:
    runner = FakeRunner().expect(SQUEUE, stdout="43 PENDING\n41 RUNNING\n")
    runner.expect(["/usr/bin/scancel", "41", "43"])
    assert job(runner, state="absent", name="nightly").apply() == {
        "changed": True,
        "job_ids": ["41", "43"],
    }


def test_absent_with_nothing_to_cancel_changes_nothing() -> None:
    runner = FakeRunner().expect(SQUEUE, stdout="")
    assert job(runner, state="absent", name="nightly").apply() == {"changed": False, "job_ids": []}


def test_absent_in_check_mode_cancels_nothing() -> None:
    runner = FakeRunner().expect(SQUEUE, stdout="41 RUNNING\n")
    assert job(runner, check_mode=True, state="absent", name="nightly").apply() == {
        "changed": True,
        "job_ids": ["41"],
    }
    assert len(runner.calls) == 1


def test_absent_by_id_leaves_a_finished_job() -> None:
    runner = FakeRunner().expect(SCONTROL, stdout=job_line("COMPLETED"))
    assert job(runner, state="absent", job_id="42").apply() == {"changed": False, "job_ids": []}


def test_a_job_slurmctld_forgot_is_read_from_sacct() -> None:
    runner = FakeRunner().expect(
        SCONTROL, rc=1, stderr="slurm_load_jobs error: Invalid job id specified\n"
    )
    runner.expect(
        [
            "/usr/bin/sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            "--format=JobID,State,ExitCode,ElapsedRaw,NodeList",
            "--jobs=42",
        ],
        stdout="42|CANCELLED by 0|0:15|7|worker2\n",
    )
    with pytest.raises(SlurmJobError, match="ended CANCELLED") as failure:
        SlurmJob(params(state="present", name="x", command="true", wait=True), runner).report(
            "42", changed=False
        )
    assert failure.value.result["elapsed"] == 7
    assert failure.value.result["nodes"] == "worker2"


def test_a_job_unknown_everywhere_is_an_error() -> None:
    runner = FakeRunner(tools=("sbatch", "scontrol")).expect(
        SCONTROL, rc=1, stderr="Invalid job id specified\n"
    )
    with pytest.raises(
        SlurmJobError,
        match=r"^job 42 not found by scontrol \(rc 1: Invalid job id specified\) nor sacct$",
    ):
        SlurmJob(params(state="absent", job_id="42"), runner).apply()
