"""Staging, sbatch, waiting and fetching through a fake transport: the exact commands and files."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from gpulab.cli.main import main
from gpulab.graph import GraphInvalid
from gpulab.submit import (
    JobFailed,
    JobForgotten,
    JobOptions,
    JobState,
    LocalTransport,
    SubmittedJob,
    Unreachable,
    WaitTimedOut,
    fetch_result,
    prepare,
    submit,
    wait,
    wait_for_result,
)
from gpulab.submit.job import FIRST_POLL_S, FORGOTTEN_POLLS, GARBLED_POLLS, job_script
from gpulab.submit.staging import upload

from tests.submit.fakes import FakeTransport, ok

JOB_DIR = "/srv/gpulab/jobs/file_graph.Ab12Cd34"
JOB = SubmittedJob(
    "17",
    JOB_DIR,
    f"{JOB_DIR}/graph.json",
    f"{JOB_DIR}/result.json",
    f"{JOB_DIR}/slurm-17.out",
    f"{JOB_DIR}/slurm-17.err",
)


def _graph_with_file(folder: Path) -> Path:
    (folder / "data").mkdir()
    np.save(folder / "data" / "v.npy", np.arange(4, dtype=np.float32))
    graph = {
        "version": 1,
        "name": "file graph",
        "inputs": {
            "v": {"type": "vector", "file": "data/v.npy"},
            "a": {"type": "scalar", "value": 2.0},
        },
        "nodes": [{"id": "s", "op": "scale", "inputs": {"x": "v", "a": "a"}}],
        "outputs": ["s"],
    }
    path = folder / "g.json"
    path.write_text(json.dumps(graph))
    return path


def test_prepare_renames_file_inputs_into_the_job_directory(tmp_path: Path) -> None:
    staged = prepare(_graph_with_file(tmp_path))
    assert staged.name == "file graph"
    assert staged.document["inputs"]["v"] == {"type": "vector", "file": "input-0-v.npy"}
    assert staged.files == (("input-0-v.npy", tmp_path / "data" / "v.npy"),)


def test_prepare_refuses_an_invalid_graph(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": 1, "inputs": {}, "nodes": [], "outputs": ["x"]}))
    with pytest.raises(GraphInvalid):
        prepare(path)


def test_job_script_quotes_every_word() -> None:
    script = job_script(JobOptions(backend="vulkan"), "/jobs/it's here/graph.json", "/jobs/r.json")
    assert script.startswith("#!/bin/sh\n# Written by gpulab submit.\n")
    assert script.splitlines()[-1] == (
        "exec gpulab run '/jobs/it'\"'\"'s here/graph.json' --backend vulkan --output /jobs/r.json"
    )
    assert shlex.split(script.splitlines()[-1])[3] == "/jobs/it's here/graph.json"


def test_job_script_forwards_the_memory_budget() -> None:
    script = job_script(JobOptions(memory_budget=64 << 20), "/jobs/g.json", "/jobs/r.json")
    assert shlex.split(script.splitlines()[-1])[-2:] == ["--memory-budget", str(64 << 20)]


def _run_job_script(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The job script run by /bin/sh, with `echo` standing in for gpulab (prints its words)."""
    folder = tmp_path / "it's a job"
    folder.mkdir(exist_ok=True)
    options = JobOptions(backend="cpu", gpulab="echo")
    script = job_script(options, str(folder / "graph.json"), str(folder / "result.json"))
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=False)


def test_job_script_runs_the_graph_once(tmp_path: Path) -> None:
    """A job Slurm starts again after it ran to its end (a requeue, or slurmctld back without
    its last seconds of state: docs/reliability.md) does not run the graph a second time."""
    first = _run_job_script(tmp_path)
    assert first.returncode == 0 and first.stdout.startswith("run "), first
    (tmp_path / "it's a job" / "result.json").write_text("{}")
    again = _run_job_script(tmp_path)
    assert again.returncode == 0 and again.stdout == "", again
    assert "exists: this job ran to its end before" in again.stderr
    assert again.stderr.count("\n") == 1


def test_submit_stages_then_runs_sbatch(tmp_path: Path) -> None:
    transport = FakeTransport({"mktemp": [ok(JOB_DIR + "\n")], "sbatch": [ok("17\n")]})
    options = JobOptions(backend="cpu", partition="main", nodelist="worker2")
    job = submit(transport, prepare(_graph_with_file(tmp_path)), options)
    assert job == JOB
    assert transport.calls == [
        ("mktemp", "-d", "/srv/gpulab/jobs/file_graph.XXXXXXXX"),
        (
            "sbatch",
            "--parsable",
            "--job-name=gpulab-file_graph",
            "--comment=file_graph.Ab12Cd34",
            "--partition=main",
            "--nodelist=worker2",
            f"--chdir={JOB_DIR}",
            f"--output={JOB_DIR}/slurm-%j.out",
            f"--error={JOB_DIR}/slurm-%j.err",
            f"{JOB_DIR}/job.sh",
        ),
    ]
    assert sorted(transport.files) == [
        f"{JOB_DIR}/graph.json",
        f"{JOB_DIR}/input-0-v.npy",
        f"{JOB_DIR}/job.sh",
    ]
    assert transport.files[f"{JOB_DIR}/input-0-v.npy"] == (tmp_path / "data/v.npy").read_bytes()
    staged_graph = json.loads(transport.files[f"{JOB_DIR}/graph.json"])
    assert staged_graph["inputs"]["v"]["file"] == "input-0-v.npy"
    assert (
        transport.files[f"{JOB_DIR}/job.sh"]
        .decode()
        .endswith(
            f"exec gpulab run {JOB_DIR}/graph.json --backend cpu --output {JOB_DIR}/result.json\n"
        )
    )


def test_submit_with_shards_asks_for_them_and_no_sinfo(tmp_path: Path) -> None:
    transport = FakeTransport({"mktemp": [ok(JOB_DIR + "\n")], "sbatch": [ok("17\n")]})
    job = submit(transport, prepare(_graph_with_file(tmp_path)), JobOptions(shards=2))
    assert job.gres == "shard:2"
    assert transport.programs() == ["mktemp", "sbatch"]
    assert "--gres=shard:2" in transport.calls[-1]


def test_job_options_refuse_shards_with_gpus_or_below_1() -> None:
    with pytest.raises(ValueError, match="gpus and shards exclude each other"):
        JobOptions(gpus=0, shards=1)
    with pytest.raises(ValueError, match="shards must be 1 or more, not 0"):
        JobOptions(shards=0)


def test_a_missing_shared_dir_says_what_to_pass(tmp_path: Path) -> None:
    failure = "mktemp: failed to create directory via template '/nfs/x.XXXXXXXX': No such file"
    transport = FakeTransport({"mktemp": [ok(stderr=failure, code=1)]})
    with pytest.raises(Exception, match=r"cannot create a job directory in /nfs .*--shared-dir"):
        submit(
            transport, prepare(_graph_with_file(tmp_path)), JobOptions(shared_dir="/nfs", gpus=0)
        )
    assert transport.files == {}


class _FullStorage(FakeTransport):
    """The shared storage is full: every write fails as OpenSSH's sftp-server reports it."""

    def write_file(self, path: str, data: bytes) -> None:
        raise OSError("Failure")


def test_a_job_whose_files_cannot_be_written_is_not_submitted(tmp_path: Path) -> None:
    transport = _FullStorage({"mktemp": [ok(JOB_DIR + "\n")], "rm": [ok()]})
    with pytest.raises(Unreachable) as raised:
        submit(transport, prepare(_graph_with_file(tmp_path)), JobOptions(gpus=0))
    assert str(raised.value) == (
        f"cannot write the job's files in {JOB_DIR} on fake-controller (Failure): nothing was "
        "submitted and the folder is removed; is the shared storage full or read-only?"
    )
    assert transport.calls[-1] == ("rm", "-rf", "--", JOB_DIR)
    assert not any(call[0] == "sbatch" for call in transport.calls)


def _squeue(state: str, reason: str = "None", nodes: str = "") -> str:
    job = {"job_id": 17, "job_state": state, "state_reason": reason, "nodes": nodes}
    return json.dumps({"jobs": [job]})


def test_wait_reports_each_change_then_the_final_state() -> None:
    transport = FakeTransport(
        {
            "squeue": [
                ok(_squeue("PENDING", "Resources")),
                ok(_squeue("PENDING", "Resources")),
                ok(_squeue("RUNNING", nodes="worker1")),
                ok(_squeue("COMPLETED", nodes="worker1")),
            ],
            "scontrol": [ok("JobId=17 JobState=COMPLETED ExitCode=0:0 NodeList=worker1")],
        }
    )
    progress: list[str] = []
    final = wait(transport, JOB, progress.append, sleep=lambda _: None)
    assert final == JobState("COMPLETED", "", "worker1", exit_code=0, signal=0, job_id="17")
    assert progress == [
        "job 17 PENDING (Resources)",
        "job 17 RUNNING on worker1",
        "job 17 COMPLETED on worker1 (exit code 0)",
    ]


def _clocked() -> tuple[list[float], Callable[[], float], Callable[[float], None]]:
    """A clock that only the waits move: (the gaps slept, clock, sleep)."""
    gaps: list[float] = []

    def sleep(seconds: float) -> None:
        gaps.append(seconds)

    return gaps, lambda: sum(gaps), sleep


def test_a_known_job_is_polled_often_at_first_then_every_poll_s() -> None:
    running = ok(_squeue("RUNNING", nodes="worker1"))
    transport = FakeTransport(
        {
            "squeue": [running] * 20 + [ok(_squeue("COMPLETED", nodes="worker1"))],
            "scontrol": [ok("JobId=17 JobState=COMPLETED ExitCode=0:0 NodeList=worker1")],
        }
    )
    gaps, clock, sleep = _clocked()
    wait(transport, JOB, lambda _: None, poll_s=2, clock=clock, sleep=sleep)
    # A quarter of the time waited, at least FIRST_POLL_S, at most poll_s.
    assert gaps[:5] == [FIRST_POLL_S] * 5
    assert all(gap == min(2, max(FIRST_POLL_S, sum(gaps[:i]) / 4)) for i, gap in enumerate(gaps))
    assert gaps[-2:] == [2, 2] and len(gaps) == 20


def test_a_job_slurm_does_not_know_is_polled_every_poll_s() -> None:
    gaps, clock, sleep = _clocked()
    with pytest.raises(JobForgotten):
        wait(_forgotten(), JOB, lambda _: None, poll_s=2, clock=clock, sleep=sleep)
    assert gaps == [2] * (FORGOTTEN_POLLS - 1)  # 28 s with no record of it, as before


def test_wait_keeps_polling_until_a_final_state_is_known() -> None:
    transport = FakeTransport(
        {
            "squeue": [ok(json.dumps({"jobs": []}))],
            "scontrol": [ok(stderr="Invalid job id specified", code=1)],
            "sacct": [ok(""), ok("17|FAILED|4:0|9|worker2\n")],
        }
    )
    final = wait(transport, JOB, lambda _: None, sleep=lambda _: None)
    assert final == JobState("FAILED", "", "worker2", exit_code=4, signal=0, job_id="17", elapsed=9)
    assert transport.programs().count("squeue") == 2


def _forgotten() -> FakeTransport:
    """A controller past MinJobAge (or that lost its state) without accounting."""
    return FakeTransport(
        {
            "squeue": [ok(stderr="slurm_load_jobs error: Invalid job id specified", code=1)],
            "scontrol": [ok(stderr="slurm_load_jobs error: Invalid job id specified", code=1)],
            "sacct": [ok(stderr="sacct: error: Problem talking to the database", code=1)],
        }
    )


def test_wait_gives_up_on_a_job_slurm_forgot() -> None:
    transport = _forgotten()
    sleeps: list[float] = []
    with pytest.raises(JobForgotten, match=r"^job 17 is unknown to Slurm: squeue, scontrol and"):
        wait(transport, JOB, lambda _: None, sleep=sleeps.append)
    assert transport.programs().count("squeue") == FORGOTTEN_POLLS
    assert len(sleeps) == FORGOTTEN_POLLS - 1


def test_a_job_slurm_knows_again_resets_the_count() -> None:
    unknown = ok(stderr="Invalid job id specified", code=1)
    running = ok(_squeue("RUNNING", nodes="worker1"))
    polls = [unknown] * (FORGOTTEN_POLLS - 1) + [running] + [unknown] * (FORGOTTEN_POLLS - 1)
    transport = FakeTransport(
        {
            "squeue": [*polls, ok(_squeue("COMPLETED", nodes="worker1"))],
            "scontrol": [unknown] * (2 * FORGOTTEN_POLLS - 2)
            + [ok("JobId=17 JobState=COMPLETED ExitCode=0:0 NodeList=worker1")],
            "sacct": [ok("")],
        }
    )
    final = wait(transport, JOB, lambda _: None, sleep=lambda _: None)
    assert final.state == "COMPLETED"


def test_a_forgotten_job_without_result_names_its_files() -> None:
    with pytest.raises(JobFailed) as failure:
        wait_for_result(_forgotten(), JOB, lambda _: None, poll_s=0)
    assert str(failure.value) == (
        f"job 17 is unknown to Slurm: squeue, scontrol and sacct had no record of it "
        "(sacct at most its submission) in "
        f"{FORGOTTEN_POLLS} polls and it wrote no result; its files are in {JOB_DIR}"
    )


def test_a_forgotten_job_that_wrote_its_result_returns_it() -> None:
    transport = _forgotten()
    transport.files[JOB.result] = b'{"version": 1, "outputs": {}}'
    progress: list[str] = []
    document = wait_for_result(transport, JOB, progress.append, poll_s=0)
    assert document == {"version": 1, "outputs": {}, "slurm": {"job_id": "17"}}
    assert progress[-1].endswith(f"; using the result it wrote, {JOB.result}")


@pytest.mark.parametrize(
    "garbage",
    ["", "squeue: error: something\n", '{"jobs": [{"job_id": 17, "job_st', "[]", '{"jobs": 3}'],
)
def test_garbled_squeue_output_is_polled_again(garbage: str) -> None:
    transport = FakeTransport(
        {
            "squeue": [ok(garbage), ok(garbage), ok(_squeue("COMPLETED", nodes="worker1"))],
            "scontrol": [ok("JobId=17 JobState=COMPLETED ExitCode=0:0 NodeList=worker1")],
        }
    )
    final = wait(transport, JOB, lambda _: None, sleep=lambda _: None)
    assert final.state == "COMPLETED"
    assert transport.programs() == ["squeue", "squeue", "squeue", "scontrol"]


def test_garbled_squeue_output_that_persists_stops_with_one_line() -> None:
    transport = FakeTransport({"squeue": [ok('{"jobs": [{"job_id": 17, "job_st')]})
    with pytest.raises(Unreachable) as failure:
        wait(transport, JOB, lambda _: None, sleep=lambda _: None)
    assert str(failure.value) == (
        'squeue printed no JSON: \'{"jobs": [{"job_id": 17, "job_st\' (on fake-controller), '
        f"{GARBLED_POLLS} polls in a row: stopped waiting for job 17 (files in {JOB_DIR})"
    )
    assert transport.programs() == ["squeue"] * GARBLED_POLLS


def test_wait_cancels_a_job_that_outlives_the_timeout() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    transport = FakeTransport(
        {"squeue": [ok(_squeue("RUNNING", nodes="worker1"))], "scancel": [ok()]}
    )
    with pytest.raises(WaitTimedOut, match="job 17 still RUNNING on worker1 after 5 s"):
        wait(
            transport, JOB, lambda _: None, timeout_s=5, poll_s=2, clock=lambda: now[0], sleep=sleep
        )
    assert transport.calls[-1] == ("scancel", "17")
    assert 5 <= now[0] < 5 + 2  # at the first poll past the timeout


def test_fetch_result_adds_nothing_the_run_recorded() -> None:
    transport = FakeTransport()
    result = {"version": 1, "slurm": {"job_id": "17", "nodelist": "worker1"}}
    transport.files[JOB.result] = json.dumps(result).encode()
    final = JobState("COMPLETED", "", "worker1", exit_code=0)
    assert fetch_result(transport, JOB, final) == result


def test_fetch_result_fills_in_the_job_when_the_run_did_not() -> None:
    transport = FakeTransport()
    transport.files[JOB.result] = b'{"version": 1}'
    final = JobState("COMPLETED", "", "worker1", exit_code=0)
    document = fetch_result(transport, JOB, final)
    assert document["slurm"] == {"job_id": "17", "nodelist": "worker1"}


def test_a_failed_job_names_its_state_exit_code_and_stderr_tail() -> None:
    transport = FakeTransport()
    lines = [f"line {i}" for i in range(30)]
    transport.files[JOB.stderr] = ("\n".join(lines) + "\n").encode()
    final = JobState("FAILED", "NonZeroExitCode", "worker1", exit_code=4)
    with pytest.raises(JobFailed) as failure:
        fetch_result(transport, JOB, final)
    message = str(failure.value)
    assert message.startswith(
        f"job 17 FAILED on worker1 (exit code 4); last lines of {JOB.stderr}:\n  line 10\n"
    )
    assert message.endswith("  line 29")
    assert "line 9\n" not in message


def test_a_job_without_stderr_points_at_the_shared_storage() -> None:
    final = JobState("FAILED", "", "worker1", exit_code=1)
    with pytest.raises(JobFailed, match=r"is \S+ on storage that the workers see"):
        fetch_result(FakeTransport(), JOB, final)


def test_a_completed_job_without_result_is_a_failure() -> None:
    transport = FakeTransport()
    transport.files[JOB.stderr] = b"gpulab: something\n"
    final = JobState("COMPLETED", "", "worker1", exit_code=0)
    with pytest.raises(
        JobFailed, match=r"(?s)completed but wrote no \S+/result\.json; .*gpulab: something"
    ):
        fetch_result(transport, JOB, final)


def test_a_staged_graph_runs_like_the_original(tmp_path: Path) -> None:
    original = _graph_with_file(tmp_path)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    staged = upload(LocalTransport(), prepare(original), str(job_dir))
    assert sorted(p.name for p in job_dir.iterdir()) == ["graph.json", "input-0-v.npy"]
    results = []
    for graph in (str(original), staged):
        out = tmp_path / f"{len(results)}.json"
        assert main(["run", graph, "--backend", "cpu", "--output", str(out)]) == 0
        results.append(json.loads(out.read_text())["outputs"])
    assert results[0] == results[1]
