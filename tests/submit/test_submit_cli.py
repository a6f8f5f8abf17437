"""`gpulab submit`: flags, exit codes and what reaches stdout and stderr."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gpulab.submit as submit_package
import pytest
from gpulab.cli import submit as submit_cli
from gpulab.cli.main import main
from gpulab.submit import CommandResult, parse_target

from tests.submit.fakes import FakeClock, FakeTransport, ok

EXAMPLES = Path(__file__).resolve().parents[2] / "payload/examples"
GRAPH = str(EXAMPLES / "saxpy_norm.json")
JOB_DIR = "/srv/gpulab/jobs/saxpy.x"


# `sinfo --format=%P %G` of the lab: one default partition, no GPU GRES (lavapipe).
SINFO_NO_GPUS = "main* (null)\n"


def _cluster(
    final: str, result: dict[str, object] | None = None, sinfo: str = SINFO_NO_GPUS
) -> FakeTransport:
    transport = FakeTransport(
        {
            "sinfo": [ok(sinfo)],
            "mktemp": [ok(JOB_DIR + "\n")],
            "sbatch": [ok("5\n")],
            "squeue": [ok(json.dumps({"jobs": []}))],
            "scontrol": [ok(final)],
        }
    )
    if result is not None:
        transport.files[f"{JOB_DIR}/result.json"] = json.dumps(result).encode()
    transport.files[f"{JOB_DIR}/slurm-5.err"] = b"gpulab: run failed: device lost\n"
    return transport


@pytest.fixture
def use(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeTransport]]:
    """Make the CLI use the transport appended to the yielded list."""
    chosen: list[FakeTransport] = []
    monkeypatch.setattr(submit_cli, "_transport", lambda args: chosen[0])
    yield chosen


def test_wait_prints_the_result_json(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    result = {"version": 1, "slurm": {"job_id": "5", "nodelist": "worker1"}}
    use.append(_cluster("JobId=5 JobState=COMPLETED ExitCode=0:0 NodeList=worker1", result))
    assert main(["submit", GRAPH, "--wait"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == result
    assert "gpulab: submitted job 5 on fake-controller; files in /srv/gpulab/jobs/saxpy.x" in err
    assert "gpulab: job 5 COMPLETED on worker1 (exit code 0)" in err
    assert use[0].closed


def test_output_writes_the_result_to_a_file(use: list[FakeTransport], tmp_path: Path) -> None:
    result = {"version": 1, "slurm": {"job_id": "5"}}
    use.append(_cluster("JobId=5 JobState=COMPLETED ExitCode=0:0 NodeList=worker1", result))
    out = tmp_path / "out.json"
    assert main(["submit", GRAPH, "--wait", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["slurm"]["job_id"] == "5"


def test_without_wait_prints_the_job_and_its_paths(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    use.append(_cluster("unused"))
    assert main(["submit", GRAPH]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "job_id": "5",
        "job_dir": JOB_DIR,
        "graph": f"{JOB_DIR}/graph.json",
        "result": f"{JOB_DIR}/result.json",
        "stdout": f"{JOB_DIR}/slurm-5.out",
        "stderr": f"{JOB_DIR}/slurm-5.err",
        "gres": "",
        "tag": "saxpy.x",
    }
    assert "squeue" not in use[0].programs()


def test_a_failed_job_exits_4_with_its_stderr(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    use.append(_cluster("JobId=5 JobState=FAILED ExitCode=4:0 NodeList=worker1"))
    assert main(["submit", GRAPH, "--wait"]) == 4
    out, err = capsys.readouterr()
    assert out == ""
    assert "gpulab: job 5 FAILED on worker1 (exit code 4); last lines of" in err
    assert "  gpulab: run failed: device lost" in err


def test_a_job_slurm_forgot_exits_4_naming_its_files(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit_package, "wait_for_result", _fast(submit_package.wait_for_result))
    transport = _cluster("unused")
    gone = ok(stderr="slurm_load_jobs error: Invalid job id specified", code=1)
    transport.answers.update({"squeue": [gone], "scontrol": [gone], "sacct": [ok("")]})
    use.append(transport)
    assert main(["submit", GRAPH, "--wait"]) == 4
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == (
        "gpulab: job 5 is unknown to Slurm: squeue, scontrol and sacct had no record of it "
        "(sacct at most its submission) in "
        f"15 polls and it wrote no result; its files are in {JOB_DIR}"
    )


def test_a_job_slurm_forgot_still_gives_the_result_it_wrote(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit_package, "wait_for_result", _fast(submit_package.wait_for_result))
    transport = _cluster("unused", {"version": 1})
    gone = ok(stderr="slurm_load_jobs error: Invalid job id specified", code=1)
    transport.answers.update({"squeue": [gone], "scontrol": [gone], "sacct": [ok("")]})
    use.append(transport)
    assert main(["submit", GRAPH, "--wait"]) == 0
    assert json.loads(capsys.readouterr().out) == {"version": 1, "slurm": {"job_id": "5"}}


def test_squeue_output_that_stays_garbled_exits_3(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit_package, "wait_for_result", _fast(submit_package.wait_for_result))
    transport = _cluster("unused")
    transport.answers["squeue"] = [ok("")]
    use.append(transport)
    assert main(["submit", GRAPH, "--wait"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        "gpulab: squeue printed no JSON: (nothing) (on fake-controller), 5 polls in a row: "
        f"stopped waiting for job 5 (files in {JOB_DIR})"
    )


# sbatch's answer lost: the job is looked for by its tag (tests/submit/test_submit_lookup.py
# has the cases; these are what the user sees).
SBATCH_TIMED_OUT = ok(
    stderr="sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n",
    code=1,
)
NO_CONTROLLER = ok(
    stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n", code=1
)
ANSWER_LOST = (
    "gpulab: sbatch's answer was lost (sbatch on fake-controller: Batch job submission failed: "
    "Socket timed out on send/recv operation)"
)


def _lost_answer(monkeypatch: pytest.MonkeyPatch, squeue: list[Any]) -> FakeTransport:
    """_cluster whose sbatch times out, squeue answering the look-up as given, no accounting;
    the look-up's pauses take no time."""
    clock = FakeClock()
    real = submit_package.submit
    monkeypatch.setattr(
        submit_package,
        "submit",
        lambda *args: real(*args, clock=clock.clock, sleep=clock.sleep),
    )
    transport = _cluster("JobId=5 JobState=COMPLETED ExitCode=0:0 NodeList=worker1", {"v": 1})
    transport.answers["sbatch"] = [SBATCH_TIMED_OUT]
    transport.answers["squeue"] = squeue
    transport.answers["sacct"] = [ok(stderr="Slurm accounting storage is disabled", code=1)]
    transport.answers["rm"] = [ok()]
    return transport


def test_sbatch_timed_out_but_the_job_is_queued_exits_0_with_its_id(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    queued = ok(f"5|PENDING|{JOB_DIR}|saxpy.x\n")
    use.append(_lost_answer(monkeypatch, [queued, ok(json.dumps({"jobs": []}))]))
    assert main(["submit", GRAPH, "--wait"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"v": 1, "slurm": {"job_id": "5", "nodelist": "worker1"}}
    assert err.splitlines()[:3] == [
        f"{ANSWER_LOST}; looking for the job by its tag saxpy.x for up to 60 s",
        "gpulab: found job 5 (PENDING) by its tag saxpy.x: it was queued, though sbatch's "
        "answer was lost",
        f"gpulab: submitted job 5 on fake-controller; files in {JOB_DIR}",
    ]
    assert use[0].programs().count("sbatch") == 1


def test_sbatch_timed_out_and_no_such_job_exits_3_nothing_was_queued(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use.append(_lost_answer(monkeypatch, [ok("")]))
    assert main(["submit", GRAPH, "--wait"]) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == (
        f"{ANSWER_LOST} and Slurm has no job tagged saxpy.x: nothing was queued and its folder "
        "is removed; submit again"
    )
    assert ("rm", "-rf", "--", JOB_DIR) in use[0].calls


def test_a_controller_unreachable_throughout_exits_3_the_job_may_have_been_queued(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use.append(_lost_answer(monkeypatch, [NO_CONTROLLER]))
    assert main(["submit", GRAPH, "--wait"]) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"{ANSWER_LOST} and the controller still did not answer after 60 s (squeue on "
        "fake-controller: slurm_load_jobs error: Unable to contact slurm controller (connect "
        f"failure)): the job MAY have been queued, tagged saxpy.x (its comment; its folder "
        f"{JOB_DIR}). Check before submitting again: squeue --noheader --me --states=all "
        "--name=gpulab-saxpy-then-norm '--format=%i|%T|%Z|%k'"
    )
    assert "rm" not in use[0].programs()


def _fast(wait_for_result: Callable[..., Any]) -> Callable[..., Any]:
    """wait_for_result polling without pauses."""
    return lambda *args, **kwargs: wait_for_result(*args, **kwargs, poll_s=0)


def test_a_refused_job_exits_2(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = "sbatch: error: Batch job submission failed: Invalid partition name specified"
    transport = FakeTransport({"mktemp": [ok(JOB_DIR)], "sbatch": [ok(stderr=refusal, code=1)]})
    transport.answers["sinfo"] = [ok("")]
    use.append(transport)
    assert main(["submit", GRAPH, "--partition", "nope"]) == 2
    assert "sbatch refused the job: " in capsys.readouterr().err


def _sbatch(transport: FakeTransport) -> tuple[str, ...]:
    return next(call for call in transport.calls if call[0] == "sbatch")


def test_a_partition_with_gpus_gets_one_by_default(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    use.append(_cluster("unused", sinfo="gpu gpu:h200:8(S:0-1)\n"))
    assert main(["submit", GRAPH, "--partition", "gpu"]) == 0
    assert use[0].calls[0] == ("sinfo", "--noheader", "--format=%P %G", "--partition=gpu")
    assert "--gres=gpu:1" in _sbatch(use[0])
    assert json.loads(capsys.readouterr().out)["gres"] == "gpu:1"


def test_the_default_partition_without_gpus_gets_none(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    use.append(_cluster("unused", sinfo="main* (null)\ngpu gpu:h200:8\n"))
    assert main(["submit", GRAPH, "--backend", "vulkan"]) == 0
    assert use[0].calls[0] == ("sinfo", "--noheader", "--format=%P %G")
    assert not any(word.startswith("--gres") for word in _sbatch(use[0]))
    assert "submitted job 5 on fake-controller;" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "gres"),
    [
        (["--gpus", "0"], None),
        (["--backend", "cpu"], None),
        (["--backend", "native"], None),
        (["--gpus", "2"], "--gres=gpu:2"),
        (["--backend", "cpu", "--gpus", "1"], "--gres=gpu:1"),
    ],
)
def test_gpus_given_or_a_cpu_backend_ask_no_sinfo(
    flags: list[str], gres: str | None, use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    use.append(_cluster("unused", sinfo="unused"))
    assert main(["submit", GRAPH, *flags]) == 0
    assert "sinfo" not in use[0].programs()
    asked = [word for word in _sbatch(use[0]) if word.startswith("--gres")]
    assert asked == ([gres] if gres else [])
    if gres:
        assert f"submitted job 5 with {gres} on fake-controller" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["-1", "one", "1.5"])
def test_gpus_must_be_a_count(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["submit", GRAPH, "--gpus", text])
    assert exited.value.code == 2
    assert "expected a number of GPUs (0 or more)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "gres"),
    [
        (["--shards", "1"], "shard:1"),
        (["--shards", "3", "--backend", "vulkan"], "shard:3"),
        (["--shards", "2", "--backend", "cpu"], "shard:2"),
    ],
)
def test_shards_ask_for_a_shared_gpu_and_never_a_gpu_of_its_own(
    flags: list[str], gres: str, use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    # A partition with GPUs: without --shards, auto and vulkan would get gpu:1 by default.
    use.append(_cluster("unused", sinfo="main* gpu:h100:1,shard:4\n"))
    assert main(["submit", GRAPH, *flags]) == 0
    assert use[0].programs() == ["mktemp", "sbatch"]
    assert _sbatch(use[0]) == (
        "sbatch",
        "--parsable",
        "--job-name=gpulab-saxpy-then-norm",
        "--comment=saxpy.x",
        f"--gres={gres}",
        f"--chdir={JOB_DIR}",
        f"--output={JOB_DIR}/slurm-%j.out",
        f"--error={JOB_DIR}/slurm-%j.err",
        f"{JOB_DIR}/job.sh",
    )
    out, err = capsys.readouterr()
    assert json.loads(out)["gres"] == gres
    assert f"submitted job 5 with --gres={gres} on fake-controller;" in err


@pytest.mark.parametrize("gpus", ["0", "1", "2"])
def test_shards_and_gpus_together_exit_2_before_anything_is_staged(
    gpus: str, use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    use.append(FakeTransport())
    assert main(["submit", GRAPH, "--shards", "1", "--gpus", gpus, "--wait"]) == 2
    assert use[0].calls == []
    assert use[0].files == {}
    assert capsys.readouterr().err == (
        "gpulab: --shards and --gpus exclude each other: ask for shards or for GPUs\n"
    )


@pytest.mark.parametrize("text", ["0", "-1", "one", "1.5", ""])
def test_shards_must_be_a_count_above_0(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["submit", GRAPH, "--shards", text])
    assert exited.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert errors == [
        "gpulab submit: error: argument --shards: expected a number of shards (1 or more), "
        f"got {text!r}"
    ]


def test_the_help_and_completion_offer_shards(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["submit", "--help"])
    assert "--shards N" in capsys.readouterr().out
    assert main(["completion", "bash"]) == 0
    assert "--shards" in capsys.readouterr().out


def test_an_invalid_graph_is_refused_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "inputs": {}, "nodes": [], "outputs": ["y"]}')
    # An unresolvable host would exit 3; the graph's errors come first.
    assert main(["submit", str(bad), "--host", "gpulab@host.invalid", "--wait"]) == 2
    assert f"gpulab: {bad}: outputs[0]" in capsys.readouterr().err


def test_no_sbatch_and_no_host_exits_3(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["submit", GRAPH]) == 3
    assert "sbatch is not on PATH here: pass --host USER@CONTROLLER" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--identity", "k"], "--identity needs --host"),
        (["--known-hosts", "k"], "--known-hosts needs --host"),
        (["--output", "o.json"], "--output needs --wait"),
        (["--shared-dir", "jobs"], "--shared-dir 'jobs': must be an absolute path"),
        (["--wait", "--output", "/no/such/dir/o.json"], "--output /no/such/dir/o.json: its folder"),
    ],
)
def test_flags_that_make_no_sense_exit_2(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["submit", GRAPH, *flags]) == 2
    assert f"gpulab: {message}" in capsys.readouterr().err


def test_shared_dir_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAB_SHARED_DIR", "/nfs/jobs")
    from gpulab.cli.main import build_parser  # noqa: PLC0415 - the default is read at build time

    assert build_parser().parse_args(["submit", GRAPH]).shared_dir == "/nfs/jobs"


def test_memory_budget_is_parsed_like_run() -> None:
    from gpulab.cli.main import build_parser  # noqa: PLC0415 - as above

    args = build_parser().parse_args(["submit", GRAPH, "--memory-budget", "64MiB"])
    assert args.memory_budget == 64 << 20


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_unreachable_ssh_host_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    port = str(_closed_port())
    assert main(["submit", GRAPH, "--host", "gpulab@127.0.0.1", "--port", port]) == 3
    assert f"gpulab: gpulab@127.0.0.1:{port}: cannot connect" in capsys.readouterr().err


def test_a_missing_known_hosts_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "known_hosts"
    assert main(["submit", GRAPH, "--host", "h", "--known-hosts", str(missing)]) == 2
    assert f"--known-hosts {missing}: No such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "target"),
    [("gpulab@controller1", ("gpulab", "controller1")), ("10.0.0.5", (None, "10.0.0.5"))],
)
def test_parse_target(text: str, target: tuple[str | None, str]) -> None:
    assert parse_target(text) == target


@pytest.mark.parametrize("text", ["@host", "user@", "a b@c"])
def test_parse_target_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="expected USER@HOST or HOST"):
        parse_target(text)


def test_an_unreadable_identity_exits_2_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    not_a_key = tmp_path / "id"
    not_a_key.write_text("hello\n")
    flags = ["--host", "h.invalid", "--known-hosts", str(known_hosts), "--identity"]
    assert main(["submit", GRAPH, *flags, str(tmp_path / "missing")]) == 2
    assert "--identity " in capsys.readouterr().err
    assert main(["submit", GRAPH, *flags, str(not_a_key)]) == 2
    assert f"--identity {not_a_key}: not a private key" in capsys.readouterr().err


def test_ctrl_c_while_waiting_leaves_the_job_running(
    use: list[FakeTransport], capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(argv: tuple[str, ...]) -> CommandResult:
        raise KeyboardInterrupt

    transport = _cluster("unused")
    transport.answers["squeue"] = [interrupt]
    use.append(transport)
    assert main(["submit", GRAPH, "--wait"]) == 130
    assert "stopped waiting; job 5 goes on (scancel 5 stops it)" in capsys.readouterr().err
    assert "scancel" not in transport.programs()
    assert transport.closed


def test_without_paramiko_ssh_says_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['paramiko'] = None; from gpulab.cli.main import main; "
        f"sys.exit(main(['submit', {GRAPH!r}, '--host', 'gpulab@h.invalid']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 3
    assert done.stderr == (
        "gpulab: submitting over SSH needs paramiko, the extra gpulab[submit]: "
        "pip install 'paramiko>=3.4,<5'\n"
    )
