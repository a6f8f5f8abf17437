"""`gpulab worker` and `gpulab run --worker`: the same results, messages and exit codes as a
run of its own, in the client's directory and streams; one run at a time; only its user; the
socket gone when it stops. Real processes on the Vulkan device here (lavapipe in CI)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from gpulab.cli import worker
from gpulab.cli.errors import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_TERMINATED,
    EXIT_UNAVAILABLE,
)
from gpulab.graph import GraphInvalid
from gpulab.running.kept import KeptRunners, RunnerOptions

from tests.graph.graph_helpers import small_graph, vector_graph, write_graph
from tests.payload.test_cli import GPULAB, PYTHONPATH


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHONPATH
    env.pop("GPULAB_WORKER", None)
    return env


def start_worker(path: Path, *extra: str) -> subprocess.Popen[str]:
    """A worker serving `path`, once its socket is there."""
    worker = subprocess.Popen(
        [*GPULAB, "worker", "--socket", str(path), *extra],
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    deadline = time.monotonic() + 60
    while not path.is_socket():
        assert worker.poll() is None, worker.communicate()[1]
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.05)
    return worker


@pytest.fixture
def worker_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "worker.sock"
    worker = start_worker(path)
    yield path
    worker.terminate()
    worker.wait(timeout=60)


def gpulab(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPULAB, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment(),
        timeout=120,
        check=False,
    )


def outputs(path: Path) -> dict[str, object]:
    return dict(json.loads(path.read_text())["outputs"])


def test_runs_on_the_worker_equal_runs_of_their_own(worker_socket: Path, tmp_path: Path) -> None:
    write_graph(tmp_path, small_graph())
    own = gpulab("run", "graph.json", "--backend", "vulkan", "-o", "own.json", cwd=tmp_path)
    assert own.returncode == EXIT_OK, own.stderr
    for index in range(3):  # the second and third on the device the first opened
        name = f"worker-{index}.json"
        done = gpulab(
            "run", "graph.json", "--backend", "vulkan", "-o", name, "--worker", str(worker_socket),
            cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == EXIT_OK, done.stderr
        assert outputs(tmp_path / name) == outputs(tmp_path / "own.json")


def test_output_and_messages_go_to_the_clients_streams(worker_socket: Path, tmp_path: Path) -> None:
    write_graph(tmp_path, small_graph())
    done = gpulab("run", "graph.json", "-o", "-", "--worker", str(worker_socket), cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    assert json.loads(done.stdout)["graph"] == "small"
    assert done.stderr.startswith("gpulab: auto chose")


def test_an_invalid_graph_fails_as_it_does_alone(worker_socket: Path, tmp_path: Path) -> None:
    write_graph(tmp_path, small_graph(nodes=[]))
    alone = gpulab("run", "graph.json", cwd=tmp_path)
    served = gpulab("run", "graph.json", "--worker", str(worker_socket), cwd=tmp_path)
    assert served.returncode == alone.returncode == EXIT_INPUT
    assert served.stderr == alone.stderr
    assert not (tmp_path / "graph.result.json").exists()
    # The worker still serves after a refused graph.
    write_graph(tmp_path, small_graph(), name="good.json")
    assert gpulab("run", "good.json", "--worker", str(worker_socket), cwd=tmp_path).returncode == 0


def test_a_bad_file_value_found_on_the_device_fails_as_alone_and_replays_check_again(
    worker_socket: Path, tmp_path: Path
) -> None:
    """The worker keeps the recording of a graph on .npy files, and with it the device's
    check of their values: each replay sets its verdict afresh, so a file mended since runs,
    and a file spoiled again is refused again, each as a run of its own would."""
    values = np.ones(1000, dtype=np.float32)
    values[321] = np.nan
    vector_graph(tmp_path, values, a=2.0)
    run = ("run", "graph.json", "--backend", "vulkan", "-o", "-")
    alone = gpulab(*run, cwd=tmp_path)
    assert alone.returncode == EXIT_INPUT
    assert "element [321] is nan" in alone.stderr
    for spoiled in (True, False, True):
        values[321] = np.nan if spoiled else 5.0
        np.save(tmp_path / "x.npy", values)
        served = gpulab(*run, "--worker", str(worker_socket), cwd=tmp_path)
        if spoiled:
            assert (served.returncode, served.stderr) == (EXIT_INPUT, alone.stderr)
        else:
            assert served.returncode == EXIT_OK, served.stderr
            assert json.loads(served.stdout)["outputs"]["s"]["summary"]["max"] == 10.0


def test_without_a_worker_there_it_is_one_line_and_exit_3(tmp_path: Path) -> None:
    write_graph(tmp_path, small_graph())
    done = gpulab("run", "graph.json", "--worker", str(tmp_path / "none.sock"), cwd=tmp_path)
    assert done.returncode == EXIT_UNAVAILABLE
    assert done.stderr.count("\n") == 1
    assert "no gpulab worker answers there" in done.stderr
    assert "gpulab worker --socket" in done.stderr


def test_the_environment_names_the_worker(worker_socket: Path, tmp_path: Path) -> None:
    write_graph(tmp_path, small_graph())
    env = environment() | {"GPULAB_WORKER": str(worker_socket)}
    done = subprocess.run(
        [*GPULAB, "run", "graph.json", "-o", "-"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == EXIT_OK, done.stderr


def request(path: Path, argv: list[str], cwd: Path) -> tuple[int, str]:
    """A raw request, as run_on_worker sends it: its status and what went to its stderr."""
    read_err, write_err = os.pipe()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(path))
        line = json.dumps({"argv": argv, "cwd": str(cwd)}).encode() + b"\n"
        socket.send_fds(connection, [line], [write_err, write_err])
        os.close(write_err)
        answer = connection.makefile("rb").readline()
    with os.fdopen(read_err) as err:
        return int(json.loads(answer)["status"]), err.read()


def test_the_worker_runs_gpulab_run_only(worker_socket: Path, tmp_path: Path) -> None:
    write_graph(tmp_path, small_graph())
    status, err = request(worker_socket, ["validate", "graph.json"], tmp_path)
    assert status == EXIT_INPUT
    assert err == "gpulab: the worker runs `gpulab run` only, not `gpulab validate`\n"


def test_the_socket_appears_only_once_the_worker_listens(tmp_path: Path) -> None:
    # Bound under another name and renamed into place after listen(): a client that connects
    # the moment the file is there (as start_worker's callers do) is never refused.
    path = tmp_path / "worker.sock"
    worker = subprocess.Popen(
        [*GPULAB, "worker", "--socket", str(path)], stderr=subprocess.PIPE, env=environment()
    )
    try:
        deadline = time.monotonic() + 60
        while not path.is_socket():
            assert worker.poll() is None and time.monotonic() < deadline
        status, err = request(path, ["validate", "graph.json"], tmp_path)
        assert (status, err.count("\n")) == (EXIT_INPUT, 1)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["worker.sock"]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def test_a_directory_the_worker_cannot_enter_is_one_line_and_it_serves_on(
    worker_socket: Path, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    status, err = request(worker_socket, ["run", "graph.json"], gone)
    assert status == EXIT_UNAVAILABLE
    assert err == (
        f"gpulab: the worker cannot work in this directory (No such file or directory): {gone}\n"
    )
    write_graph(tmp_path, small_graph())
    assert gpulab("run", "graph.json", "--worker", str(worker_socket), cwd=tmp_path).returncode == 0


def test_a_malformed_request_gets_no_answer_and_the_worker_serves_on(
    worker_socket: Path, tmp_path: Path
) -> None:
    read_err, write_err = os.pipe()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(worker_socket))
        socket.send_fds(connection, [b"not json\n"], [write_err])
        os.close(write_err)
        assert connection.makefile("rb").readline() == b""
    with os.fdopen(read_err) as err:
        assert err.read() == ""  # the worker closed the descriptor it was sent
    write_graph(tmp_path, small_graph())
    assert gpulab("run", "graph.json", "--worker", str(worker_socket), cwd=tmp_path).returncode == 0


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_another_user_cannot_use_the_worker(worker_socket: Path, tmp_path: Path) -> None:
    assert worker_socket.stat().st_mode & 0o777 == 0o600
    write_graph(tmp_path, small_graph())
    tmp_path.chmod(0o755)
    done = subprocess.run(
        [*GPULAB, "run", "graph.json", "--worker", str(worker_socket)],
        capture_output=True, text=True, cwd=tmp_path, env=environment(), timeout=120,
        check=False, user=65534,
    )  # fmt: skip
    assert done.returncode == EXIT_UNAVAILABLE, done.stderr


def test_sigterm_stops_the_worker_and_removes_its_socket(tmp_path: Path) -> None:
    path = tmp_path / "worker.sock"
    worker = start_worker(path)
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=60)
    assert worker.returncode == EXIT_TERMINATED
    assert err.splitlines() == [
        f"gpulab: worker {worker.pid} serving on {path}",
        "gpulab: stopped by SIGTERM",
    ]
    assert not path.exists()


def test_idle_exit_and_a_second_worker_on_the_same_socket(tmp_path: Path) -> None:
    path = tmp_path / "worker.sock"
    worker = start_worker(path, "--idle-exit", "3")
    second = gpulab("worker", "--socket", str(path), cwd=tmp_path)
    assert second.returncode == EXIT_INPUT
    assert second.stderr == f"gpulab: --socket {path}: a worker already serves it\n"
    assert worker.wait(timeout=60) == EXIT_OK
    assert not path.exists()


def test_kept_runners_are_kept_unless_a_run_leaves_them_in_doubt() -> None:
    options = RunnerOptions("cpu", None, None, True)
    with KeptRunners() as kept:
        with kept.runner(options) as first:
            pass
        with kept.runner(options) as again:
            assert again is first
        with pytest.raises(GraphInvalid), kept.runner(options) as refused_with:
            raise GraphInvalid([])
        with pytest.raises(RuntimeError), kept.runner(options) as failed:
            assert failed is refused_with is first
            raise RuntimeError("a failed run")
        with kept.runner(options) as fresh:
            assert fresh is not first
    assert fresh._closed and first._closed


def test_a_fault_in_a_run_is_one_line_and_exit_4_to_its_client_and_the_worker_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # In this process: _serve as the worker's loop calls it, with a run that raises what no
    # handler expects (a bug), on one end of a socket pair.
    def faulty(argv: list[str], cwd: str) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(worker, "_run", faulty)
    served, client = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    read_out, write_out = os.pipe()
    read_err, write_err = os.pipe()
    request = json.dumps({"argv": ["run", "graph.json"], "cwd": str(tmp_path)}).encode()
    socket.send_fds(client, [request + b"\n"], [write_out, write_err])
    os.close(write_out)
    os.close(write_err)
    with served, client:
        assert worker._serve(served) == EXIT_RUNTIME
        assert json.loads(client.makefile("rb").readline()) == {"status": EXIT_RUNTIME}
    with os.fdopen(read_out) as out, os.fdopen(read_err) as err:
        assert out.read() == ""
        assert err.read() == (
            "gpulab: the worker failed on this run (RuntimeError: a bug); it serves on\n"
        )
    assert "RuntimeError: a bug" in capfd.readouterr().err  # the worker's own log: the traceback
