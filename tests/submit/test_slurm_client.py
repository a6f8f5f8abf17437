"""The Slurm client shared by gpulab submit and the collection: its argv and how it reads
Slurm's output, pinned on output captured from Slurm 22.05 (Debian 12, inline below) and
24.11 (Debian 13, molecule/debian13: fixtures/slurm-24.11/).

fixtures/slurm-24.11/: `sbatch --parsable`, `squeue --noheader --format='%i %T'`,
`scontrol show job -o` of a running, a completed and a failed job, and
`sacct -n -P -X -o JobID,State,ExitCode,ElapsedRaw,NodeList` of the completed one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from gpulab.submit import slurm_client
from gpulab.submit.slurm_client import JobState

FIXTURES_2411 = Path(__file__).parent / "fixtures" / "slurm-24.11"

# Slurm 22.05: `scontrol show job -o 8` for a job whose script exited 3 (abridged).
SCONTROL_2205_FAILED = (
    "JobId=8 JobName=j.sh UserId=gpulab(2000) JobState=FAILED Reason=NonZeroExitCode "
    "Dependency=(null) ExitCode=3:0 RunTime=00:00:03 Partition=main ReqNodeList=(null) "
    "NodeList=worker1 BatchHost=worker1 Command=/tmp/j.sh WorkDir=/tmp StdErr=/tmp/slurm-8.out\n"
)
# `scontrol show job -o -d` adds "JOB_GRES=%s" and per node "Nodes=%s CPU_IDs=%s Mem=%lu
# GRES=%s" (Slurm's format strings; the values are those of a job given one H200).
SCONTROL_DETAILS_GPU = (
    "JobId=12 JobName=g JobState=RUNNING Reason=None ExitCode=0:0 RunTime=00:00:02 "
    "NodeList=gpu1 TresPerNode=gres:gpu:1 JOB_GRES=gpu:h200:1 "
    "Nodes=gpu1 CPU_IDs=0 Mem=0 GRES=gpu:h200:1(IDX:0) MinCPUsNode=1\n"
)
SCONTROL_DETAILS_NONE = (
    "JobId=13 JobName=c JobState=RUNNING Reason=None ExitCode=0:0 RunTime=00:00:02 "
    "NodeList=worker1 JOB_GRES=(null) Nodes=worker1 CPU_IDs=0 Mem=0 GRES= MinCPUsNode=1\n"
)


def _2411(name: str) -> str:
    return (FIXTURES_2411 / name).read_text()


# --- argv -----------------------------------------------------------------------------------


def test_sbatch_argv_puts_every_option_in_a_fixed_order() -> None:
    argv = slurm_client.sbatch_argv(
        sbatch="/usr/bin/sbatch",
        job_name="gpulab-g",
        comment="g.1",
        partition="gpu",
        nodelist="worker2",
        nodes=1,
        ntasks=2,
        gres="gpu:1",
        chdir="/jobs/g.1",
        output="/jobs/g.1/slurm-%j.out",
        error="/jobs/g.1/slurm-%j.err",
        extra=["--time=5"],
        script="/jobs/g.1/job.sh",
    )
    assert argv == [
        "/usr/bin/sbatch",
        "--parsable",
        "--job-name=gpulab-g",
        "--comment=g.1",
        "--partition=gpu",
        "--nodelist=worker2",
        "--nodes=1",
        "--ntasks=2",
        "--gres=gpu:1",
        "--chdir=/jobs/g.1",
        "--output=/jobs/g.1/slurm-%j.out",
        "--error=/jobs/g.1/slurm-%j.err",
        "--time=5",
        "/jobs/g.1/job.sh",
    ]


def test_sbatch_argv_leaves_out_what_is_unset_and_prefers_wrap() -> None:
    assert slurm_client.sbatch_argv(wrap="true", script="/ignored") == [
        "sbatch",
        "--parsable",
        "--wrap=true",
    ]
    assert slurm_client.sbatch_argv() == ["sbatch", "--parsable"]  # the script on stdin


def test_query_argvs_are_pinned() -> None:
    assert slurm_client.scontrol_job_argv("8") == ["scontrol", "show", "job", "-o", "8"]
    assert slurm_client.scontrol_job_argv("8", details=True, scontrol="/s") == [
        "/s",
        "show",
        "job",
        "-o",
        "-d",
        "8",
    ]
    assert slurm_client.sacct_argv("8") == [
        "sacct",
        "--noheader",
        "--parsable2",
        "--allocations",
        "--format=JobID,State,ExitCode,ElapsedRaw,NodeList",
        "--jobs=8",
    ]
    assert slurm_client.squeue_json_argv("8") == ["squeue", "--json", "--jobs=8"]
    assert slurm_client.squeue_named_argv("n") == [
        "squeue",
        "--noheader",
        "--me",
        "--name=n",
        "--format=%i %T",
    ]
    assert slurm_client.squeue_tagged_argv("gpulab-g") == [
        "squeue",
        "--noheader",
        "--me",
        "--states=all",
        "--name=gpulab-g",
        "--format=%i|%T|%Z|%k",
    ]
    assert slurm_client.sacct_tagged_argv("gpulab-g", sacct="/s") == [
        "/s",
        "--noheader",
        "--parsable2",
        "--allocations",
        "--name=gpulab-g",
        "--starttime=now-1days",
        "--format=JobID,State,WorkDir,Comment",
    ]
    assert slurm_client.sinfo_gres_argv() == ["sinfo", "--noheader", "--format=%P %G"]
    assert slurm_client.sinfo_gres_argv("gpu")[-1] == "--partition=gpu"


# --- sbatch ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "job_id"),
    [
        ("42\n", "42"),
        ("42;gpulab\n", "42"),
        ("warn\n7\n", "7"),
        (_2411("sbatch-parsable.txt"), "1"),
    ],
)
def test_job_id(text: str, job_id: str) -> None:
    assert slurm_client.parse_job_id(text) == job_id


@pytest.mark.parametrize("text", ["", "\n", "Submitted batch job 42\n"])
def test_no_job_id(text: str) -> None:
    with pytest.raises(ValueError, match="no job id"):
        slurm_client.parse_job_id(text)


# --- fields ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"), [("0:0", (0, 0)), ("3:0", (3, 0)), ("0:15", (0, 15)), ("", (None, None))]
)
def test_exit_code(text: str, expected: tuple[int | None, int | None]) -> None:
    assert slurm_client.parse_exit_code(text) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:00:05", 5),
        ("01:02:03", 3723),
        ("2-00:00:01", 172801),
        ("05:30", 330),
        ("INVALID", None),
        ("", None),
    ],
)
def test_duration(text: str, seconds: int | None) -> None:
    assert slurm_client.parse_duration(text) == seconds


# --- scontrol -------------------------------------------------------------------------------


def test_scontrol_2205_failed_job() -> None:
    state = slurm_client.parse_scontrol(SCONTROL_2205_FAILED)
    assert state == JobState(
        "FAILED",
        "NonZeroExitCode",
        "worker1",
        exit_code=3,
        signal=0,
        job_id="8",
        elapsed=3,
        stderr_path="/tmp/slurm-8.out",
    )
    assert state.finished
    assert not state.succeeded
    assert state.describe() == "FAILED on worker1 (exit code 3)"


def test_scontrol_signal_and_unassigned_nodes() -> None:
    state = slurm_client.parse_scontrol("JobId=9 JobState=CANCELLED ExitCode=0:15 NodeList=(null)")
    assert state is not None
    assert (state.nodes, state.exit_code, state.signal) == ("", 0, 15)
    assert state.describe() == "CANCELLED (signal 15)"


def test_scontrol_without_a_job_is_none() -> None:
    assert slurm_client.parse_scontrol("") is None


def test_scontrol_2411_running_job() -> None:
    state = slurm_client.parse_scontrol(_2411("scontrol-job-running.txt"))
    assert state is not None
    assert (state.job_id, state.state, state.finished, state.nodes) == (
        "1",
        "RUNNING",
        False,
        "worker1",
    )
    assert state.stdout_path == "/tmp/fx-1.out"
    assert state.describe() == "RUNNING on worker1"


def test_scontrol_2411_completed_job() -> None:
    state = slurm_client.parse_scontrol(_2411("scontrol-job-completed.txt"))
    assert state is not None
    assert (state.state, state.exit_code, state.signal, state.elapsed, state.nodes) == (
        "COMPLETED",
        0,
        0,
        21,
        "worker1",
    )
    assert state.succeeded


def test_scontrol_2411_failed_job() -> None:
    state = slurm_client.parse_scontrol(_2411("scontrol-job-failed.txt"))
    assert state is not None
    assert (state.state, state.exit_code, state.signal, state.nodes) == ("FAILED", 3, 0, "worker2")
    assert state.stdout_path == "/tmp/fx-2.out"


def test_scontrol_details_give_the_gres_of_each_node() -> None:
    given = slurm_client.parse_scontrol(SCONTROL_DETAILS_GPU)
    assert given is not None
    assert given.gres == "gpu:h200:1(IDX:0)"
    none = slurm_client.parse_scontrol(SCONTROL_DETAILS_NONE)
    assert none is not None
    assert none.gres == ""
    assert slurm_client.parse_scontrol(SCONTROL_2205_FAILED).gres == ""  # type: ignore[union-attr]


# --- sacct ----------------------------------------------------------------------------------


def test_sacct_2205_records() -> None:
    assert slurm_client.parse_sacct("8|FAILED|3:0|3|worker1\n", "8") == JobState(
        "FAILED", "", "worker1", exit_code=3, signal=0, job_id="8", elapsed=3
    )
    cancelled = slurm_client.parse_sacct("8|CANCELLED by 2000|0:15|7|worker2\n", "8")
    assert cancelled is not None
    assert (cancelled.state, cancelled.signal) == ("CANCELLED", 15)


def test_sacct_skips_other_records_and_knows_no_record() -> None:
    assert slurm_client.parse_sacct("7|COMPLETED|0:0|1|w1\n", "8") is None
    assert slurm_client.parse_sacct("", "8") is None


def test_sacct_2411_completed_job() -> None:
    state = slurm_client.parse_sacct(_2411("sacct-completed.txt"), "1")
    assert state is not None
    assert (state.state, state.exit_code, state.elapsed, state.nodes) == (
        "COMPLETED",
        0,
        21,
        "worker1",
    )


# --- squeue ---------------------------------------------------------------------------------


def test_squeue_json_picks_the_job_by_id_from_every_listed_job() -> None:
    # 22.05's squeue --json lists every job even with --jobs.
    text = json.dumps(
        {
            "jobs": [
                {"job_id": 7, "job_state": "CANCELLED", "state_reason": "None", "nodes": "w1"},
                {"job_id": 8, "job_state": "PENDING", "state_reason": "Resources", "nodes": ""},
            ]
        }
    )
    assert slurm_client.parse_squeue_json(text, "8") == JobState("PENDING", "Resources", job_id="8")
    assert slurm_client.parse_squeue_json(text, "9") is None


def test_squeue_json_state_as_a_list_of_flags() -> None:
    # 24.11 gives the state as a list, the base state first.
    text = json.dumps({"jobs": [{"job_id": 8, "job_state": ["RUNNING"], "nodes": "worker1"}]})
    state = slurm_client.parse_squeue_json(text, "8")
    assert state is not None
    assert state.describe() == "RUNNING on worker1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "squeue printed no JSON: (nothing)"),
        ("\n", "squeue printed no JSON: (nothing)"),
        (
            '{"jobs": [{"job_id": 8, "job_sta',
            'squeue printed no JSON: \'{"jobs": [{"job_id": 8, "job_sta\'',
        ),
        ("squeue: error: Invalid user\n", "squeue printed no JSON: 'squeue: error: Invalid user'"),
        ("[]", "squeue printed JSON without a list of jobs: '[]'"),
        ('{"jobs": null}', "squeue printed JSON without a list of jobs: '{\"jobs\": null}'"),
        ("x" * 200, "squeue printed no JSON: '" + "x" * 80 + "...'"),
    ],
)
def test_squeue_json_that_is_no_squeue_json_is_a_value_error(text: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        slurm_client.parse_squeue_json(text, "8")
    assert str(refused.value) == message


def test_squeue_json_skips_entries_that_are_no_jobs() -> None:
    text = json.dumps({"jobs": [3, None, {"job_id": 8, "job_state": "RUNNING"}]})
    state = slurm_client.parse_squeue_json(text, "8")
    assert state is not None
    assert state.state == "RUNNING"


def test_squeue_lines() -> None:
    assert slurm_client.parse_squeue_lines("41 RUNNING\n\n43 PENDING\n") == [
        ("41", "RUNNING"),
        ("43", "PENDING"),
    ]
    assert slurm_client.parse_squeue_lines(_2411("squeue-running.txt")) == [("1", "RUNNING")]


def test_tagged_jobs_of_squeue_and_sacct() -> None:
    # squeue writes "(null)" for no comment; sacct an empty field, and "CANCELLED by UID".
    text = (
        "5|PENDING|/jobs/g.Ab12|g.Ab12\n"
        "\n"
        "6|RUNNING|/jobs/g.Cd34|(null)\n"
        "7|CANCELLED by 2000|/jobs/g.Ef56|\n"
        "8_1|COMPLETED|/jobs/g.Gh78|a|comment|with bars\n"
    )
    assert slurm_client.parse_tagged_jobs(text) == [
        slurm_client.TaggedJob("5", "PENDING", "/jobs/g.Ab12", "g.Ab12"),
        slurm_client.TaggedJob("6", "RUNNING", "/jobs/g.Cd34", ""),
        slurm_client.TaggedJob("7", "CANCELLED", "/jobs/g.Ef56", ""),
        slurm_client.TaggedJob("8_1", "COMPLETED", "/jobs/g.Gh78", "a|comment|with bars"),
    ]
    assert slurm_client.parse_tagged_jobs("") == []


@pytest.mark.parametrize(
    "text", ["squeue: error: Invalid user\n", "JOBID|STATE|WORK_DIR|COMMENT\n", "5|PENDING\n"]
)
def test_tagged_jobs_refuse_what_is_no_job(text: str) -> None:
    with pytest.raises(ValueError, match="not a job of squeue or sacct: "):
        slurm_client.parse_tagged_jobs(text)


# --- states ---------------------------------------------------------------------------------


def test_terminal_states() -> None:
    assert JobState("REVOKED").finished
    assert not JobState("PENDING", "Resources").finished
    assert JobState("PENDING", "Resources").describe() == "PENDING (Resources)"
    assert not JobState("COMPLETED", exit_code=0, signal=9).succeeded


# --- GRES -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("(null)", 0),
        ("", 0),
        ("gpu", 1),
        ("gpu:2", 2),
        ("gpu:orin", 1),
        ("gpu:h200:8(S:0-1)", 8),
        ("gpu:h200:1(IDX:0)", 1),
        ("gpu:tesla:2,gpu:k80:1", 3),
        ("mps:100,gpu:1(S:0,1)", 1),
        ("shard:4", 0),
    ],
)
def test_gres_gpu_count(gres: str, gpus: int) -> None:
    assert slurm_client.gres_gpu_count(gres) == gpus


SINFO = "main* (null)\nmain* gpu:h200:2(S:0)\ncpu (null)\n"


@pytest.mark.parametrize(("partition", "gpus"), [(None, 2), ("main", 2), ("cpu", 0), ("nope", 0)])
def test_partition_gpu_count(partition: str | None, gpus: int) -> None:
    assert slurm_client.partition_gpu_count(SINFO, partition) == gpus


# Slurm 22.05: sinfo_nodes_argv while the health check drained one worker, another was not
# answering and a third was in two partitions.
SINFO_NODES_2205 = (
    "worker1|idle|none\n"
    "worker2|draining|gpulab-health: saxpy: 3 of 1024 elements wrong (device 0)\n"
    "worker3|down*|Not responding\n"
    "worker1|idle|none\n"
    "worker4|mixed-|none\n"
)


def test_node_states_keep_the_base_state_the_answer_and_the_reason() -> None:
    assert slurm_client.parse_node_states(SINFO_NODES_2205) == [
        slurm_client.NodeState("worker1", "idle", True, ""),
        slurm_client.NodeState(
            "worker2", "draining", True, "gpulab-health: saxpy: 3 of 1024 elements wrong (device 0)"
        ),
        slurm_client.NodeState("worker3", "down", False, "Not responding"),
        slurm_client.NodeState("worker4", "mixed", True, ""),
    ]


def test_queued_jobs_name_every_partition_and_their_submit_time() -> None:
    jobs = slurm_client.parse_queued_jobs(
        "main|RUNNING|2026-12-03T19:57:07\ndebug,main|PENDING|N/A\nnot a job line\n"
    )
    assert [(j.partitions, j.state) for j in jobs] == [
        (("main",), "running"),
        (("debug", "main"), "pending"),
    ]
    assert jobs[0].submitted is not None and jobs[1].submitted is None


def test_poll_gap_is_a_quarter_of_the_wait_between_its_bounds() -> None:
    assert slurm_client.poll_gap(0.0, 0.25, 2.0) == 0.25
    assert slurm_client.poll_gap(4.0, 0.25, 2.0) == 1.0
    assert slurm_client.poll_gap(60.0, 0.25, 2.0) == 2.0
    assert slurm_client.poll_gap(60.0, 0.0, 0.0) == 0.0  # poll_s=0: tests that do not wait


def test_node_partition_job_and_update_argvs_are_pinned() -> None:
    assert slurm_client.sinfo_node_details_argv() == [
        "sinfo",
        "--noheader",
        "--Node",
        "--format=%N|%T|%u|%G|%f|%P|%E",
    ]
    assert slurm_client.sinfo_node_details_argv(["a", "b"])[-1] == "--nodes=a,b"
    assert slurm_client.sinfo_partition_details_argv() == [
        "sinfo",
        "--noheader",
        "--format=%P|%a|%l|%D|%N",
    ]
    assert slurm_client.squeue_jobs_argv(["w1"]) == [
        "squeue",
        "--noheader",
        "--all",
        "--format=%i|%T|%P|%u|%D|%N|%r|%j",
        "--nodelist=w1",
    ]
    assert slurm_client.scontrol_update_nodes_argv(["w1", "w2"], "drain", "why not") == [
        "scontrol",
        "update",
        "nodename=w1,w2",
        "state=drain",
        "reason=why not",
    ]
    assert slurm_client.scontrol_update_nodes_argv(["w1"], "resume") == [
        "scontrol",
        "update",
        "nodename=w1",
        "state=resume",
    ]
    assert slurm_client.scontrol_reconfigure_argv() == ["scontrol", "reconfigure"]
    assert slurm_client.scancel_argv(["5", "6"]) == ["scancel", "5", "6"]


@pytest.mark.parametrize(
    ("long_state", "healthy", "unavailable"),
    [
        ("idle", True, False),
        ("mixed", True, False),
        ("allocated", True, False),
        ("completing", True, False),
        ("idle*", False, False),  # slurmd does not answer
        ("idle+drain", False, True),
        ("draining", False, True),
        ("drained", False, True),
        ("down*", False, True),
        ("fail", False, True),
        ("unknown", False, False),
        ("future", False, False),
    ],
)
def test_the_one_definition_of_a_healthy_node(
    long_state: str, healthy: bool, unavailable: bool
) -> None:
    (node,) = slurm_client.parse_node_details(f"w1|{long_state}|Unknown|(null)|(null)|main*|none\n")
    assert (node.healthy, node.unavailable) == (healthy, unavailable)


def test_one_command_result_type_for_the_transports_and_the_collections_runner() -> None:
    # The collection's slurm_runner imports it from the same file (tests/collection).
    from gpulab.submit import transport  # noqa: PLC0415

    assert transport.CommandResult is slurm_client.CommandResult
    assert list(slurm_client.CommandResult.__dataclass_fields__) == [
        "argv",
        "returncode",
        "stdout",
        "stderr",
    ]


class _Slurm:
    """A run callable answering each program with a fixed result, recording every argv."""

    def __init__(self, **answers: tuple[int, str, str]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> slurm_client.CommandResult:
        self.calls.append(tuple(argv))
        code, out, err = self.answers[argv[0]]
        return slurm_client.CommandResult(tuple(argv), code, out, err)


def test_the_program_reads_a_nodes_reason(capsys: pytest.CaptureFixture[str]) -> None:
    run = _Slurm(
        sinfo=(0, "w1|drained|root|(null)|(null)|main*|gpulab-health: lost (device 0)\n", "")
    )
    assert slurm_client.main(["reason", "w1"], run) == 0
    assert capsys.readouterr().out == "gpulab-health: lost (device 0)\n"
    assert run.calls == [
        ("sinfo", "--noheader", "--Node", "--format=%N|%T|%u|%G|%f|%P|%E", "--nodes=w1")
    ]
    run = _Slurm(sinfo=(0, "w1|idle|Unknown|(null)|(null)|main*|none\n", ""))
    assert slurm_client.main(["reason", "w1"], run) == 0
    assert capsys.readouterr().out == "none\n"


def test_the_program_drains_resumes_and_lists_unhealthy_nodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _Slurm(
        scontrol=(0, "", ""),
        sinfo=(
            0,
            "w1|idle|Unknown|(null)|(null)|main*|none\nw2|down*|slurm|(null)|(null)|main*|x\n",
            "",
        ),
    )
    assert slurm_client.main(["drain", "w1", "gpulab-health: lost"], run) == 0
    assert slurm_client.main(["resume", "w1"], run) == 0
    assert slurm_client.main(["unhealthy"], run) == 0
    assert capsys.readouterr().out == "w2 down*\n"
    assert run.calls[:2] == [
        ("scontrol", "update", "nodename=w1", "state=drain", "reason=gpulab-health: lost"),
        ("scontrol", "update", "nodename=w1", "state=resume"),
    ]


def test_the_program_prints_the_jobs_details_and_fails_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _Slurm(scontrol=(0, SCONTROL_DETAILS_GPU, ""))
    assert slurm_client.main(["job-details", "12"], run) == 0
    assert capsys.readouterr().out == SCONTROL_DETAILS_GPU
    assert run.calls == [("scontrol", "show", "job", "-o", "-d", "12")]
    run = _Slurm(scontrol=(1, "", "slurm_load_jobs error: Invalid job id specified\n"))
    assert slurm_client.main(["job-details", "12"], run) == 1
    assert capsys.readouterr().err == (
        "slurm_client: scontrol failed (rc 1): slurm_load_jobs error: Invalid job id specified\n"
    )
    assert slurm_client.main(["drain", "w1"], run) == 2
    assert capsys.readouterr().err.startswith("usage: slurm_client.py COMMAND ARGS")


# --- the one wait: SlurmClient.wait_for_end ----------------------------------------------------


def _client(
    answers: dict[str, list[tuple[int, str]]],
) -> tuple[slurm_client.SlurmClient, list[str]]:
    """A client whose commands answer in turn per program (the last answer repeats)."""
    asked: list[str] = []

    def run(argv: Sequence[str]) -> slurm_client.CommandResult:
        asked.append(argv[0])
        queue = answers[argv[0]]
        code, out = queue.pop(0) if len(queue) > 1 else queue[0]
        return slurm_client.CommandResult(tuple(argv), code, out, "" if code == 0 else out)

    return slurm_client.SlurmClient(run), asked


def test_the_wait_asks_the_queue_then_the_controller_and_reports_progress() -> None:
    running = slurm_client.JobState("RUNNING", nodes="worker1", job_id="5")
    queue = [running, running, None]
    client, asked = _client({"scontrol": [(0, "JobId=5 JobState=COMPLETED ExitCode=0:0")]})
    progress: list[str] = []
    final = client.wait_for_end(
        "5", timeout=None, longest_gap=2, first_gap=0.5, clock=lambda: 0.0,
        sleep=lambda _: None, queued=lambda _: queue.pop(0), progress=progress.append,
    )  # fmt: skip
    assert final.state == "COMPLETED"
    assert progress == ["job 5 RUNNING on worker1", "job 5 COMPLETED (exit code 0)"]
    assert asked == ["scontrol"]


def test_the_wait_gives_up_on_unreadable_answers_and_unknown_jobs() -> None:
    def garbled(_: str) -> None:
        raise slurm_client.UnreadableAnswer("squeue printed no JSON")

    client, _ = _client({"scontrol": [(1, "Invalid job id specified")], "sacct": [(0, "")]})
    gaps: list[float] = []
    wait = {"timeout": None, "longest_gap": 2, "first_gap": 0.5, "clock": lambda: 0.0,
            "sleep": gaps.append}  # fmt: skip
    with pytest.raises(slurm_client.UnreadableAnswer, match="no JSON, 3 polls in a row: stopped"):
        client.wait_for_end("5", queued=garbled, unreadable_polls=3, **wait)
    assert gaps == [2, 2]
    with pytest.raises(slurm_client.JobUnknown) as unknown:
        client.wait_for_end("5", queued=lambda _: None, unknown_polls=4, **wait)
    assert unknown.value.polls == 4


def test_the_wait_cancels_at_the_timeout_when_asked() -> None:
    now = [0.0]
    client, asked = _client({"scontrol": [(0, "JobId=5 JobState=RUNNING")], "scancel": [(0, "")]})
    with pytest.raises(slurm_client.WaitTimedOut) as timed_out:
        client.wait_for_end(
            "5", timeout=3, longest_gap=2, first_gap=1, clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + s), cancel_at_timeout=True,
        )  # fmt: skip
    assert timed_out.value.state is not None and timed_out.value.state.state == "RUNNING"
    assert asked[-1] == "scancel"
