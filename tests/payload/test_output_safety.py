"""`gpulab run -o`: only a regular file is replaced, never through a link, never a device,
FIFO or kernel file, and nobody can redirect the write between the check and the rename
(as root, `-o /proc/sys/kernel/hostname` used to rename the machine)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from gpulab.results import result_file
from gpulab.running import Runner

from tests.graph.graph_helpers import GPULAB, cli, small_graph, write_graph

NOT_REGULAR = (
    "is not a regular file (a device, FIFO or socket); a result goes into a regular file, "
    "or to stdout with `-o -`"
)
LINK = (
    "is a symbolic link; a result is never written through one (a link planted in a shared "
    "folder could point anywhere): name the file itself"
)


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal must come before the graph runs (and so before anything is written)."""

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the graph ran")

    monkeypatch.setattr(Runner, "run", no_work)


def contents(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("/dev/null", NOT_REGULAR),
        ("/dev/full", NOT_REGULAR),
        ("/proc/sys/kernel/hostname", "is in the kernel's proc file system"),
        ("/proc/version", "is in the kernel's proc file system"),
        ("/proc/sys/kernel/new-name.json", "is in the kernel's proc file system"),
        ("/sys/kernel/uevent_seqnum", "is in the kernel's sysfs file system"),
        ("/dev/fd/1", LINK),
    ],
)
def test_a_target_that_is_no_regular_file_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_run: None, output: str, reason: str
) -> None:
    # Was: written in place (devices, /proc, /sys): as root a run renamed the machine.
    if not Path(output).parent.exists():
        pytest.skip(f"{Path(output).parent} does not exist here")
    kernel_file = output.startswith("/proc/")  # small and finite to read, unlike /dev/full
    before = contents(Path(output)) if kernel_file else None
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", output)
    assert (code, out) == (2, "")
    assert err.startswith(f"gpulab: --output {output}: {reason}")
    assert len(err.splitlines()) == 1
    if kernel_file:
        assert contents(Path(output)) == before


def test_a_fifo_is_refused_without_opening_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_run: None
) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(fifo))
    assert (code, out, err) == (2, "", f"gpulab: --output {fifo}: {NOT_REGULAR}\n")


@pytest.mark.parametrize("points_at", ["victim.json", "/proc/sys/kernel/hostname"])
def test_a_link_planted_as_the_output_is_refused_and_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_run: None, points_at: str
) -> None:
    # A job user plants jobs/42/out.json -> ~victim/.bashrc (or a kernel file) in the shared
    # job folder; the admin's `gpulab run -o jobs/42/out.json` used to replace what it named.
    victim = tmp_path / points_at
    if points_at == "victim.json":
        victim.write_text("precious\n", encoding="utf-8")
    before = contents(victim)
    shared = tmp_path / "jobs"
    shared.mkdir()
    (shared / "out.json").symlink_to(victim)
    path = write_graph(tmp_path, small_graph())
    output = str(shared / "out.json")
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", output)
    assert (code, out, err) == (2, "", f"gpulab: --output {output}: {LINK}\n")
    assert contents(victim) == before
    assert (shared / "out.json").is_symlink()


def swap_during_the_run(monkeypatch: pytest.MonkeyPatch, swap: Any) -> None:
    """Runner.run runs the graph, then `swap` plays the other user, before the result is
    written."""
    real_run = Runner.run

    def run_then_swap(self: Runner, *args: Any, **kwargs: Any) -> Any:
        result = real_run(self, *args, **kwargs)
        swap()
        return result

    monkeypatch.setattr(Runner, "run", run_then_swap)


def test_a_folder_swapped_for_a_link_while_the_graph_runs_gets_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: checked, then written by path: a folder replaced by a link to the victim's folder
    # in between got the result renamed over the victim's file.
    job, victims = tmp_path / "job", tmp_path / "victims"
    job.mkdir()
    victims.mkdir()
    (victims / "out.json").write_text("precious\n", encoding="utf-8")

    def swap() -> None:
        job.rename(tmp_path / "job.old")
        job.symlink_to(victims)

    swap_during_the_run(monkeypatch, swap)
    path = write_graph(tmp_path, small_graph())
    output = str(job / "out.json")
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", output)
    assert (code, out) == (2, "")
    assert err == (
        f"gpulab: --output {output}: the folder {job} was replaced while the graph ran; "
        "nothing was written\n"
    )
    assert (victims / "out.json").read_text(encoding="utf-8") == "precious\n"
    assert sorted(p.name for p in victims.iterdir()) == ["out.json"]


def test_a_file_swapped_for_a_link_while_the_graph_runs_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    victim, out_json = tmp_path / "victim.json", tmp_path / "out.json"
    victim.write_text("precious\n", encoding="utf-8")
    out_json.write_text("{}\n", encoding="utf-8")

    def swap() -> None:
        out_json.unlink()
        out_json.symlink_to(victim)

    swap_during_the_run(monkeypatch, swap)
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(out_json))
    assert (code, out, err) == (2, "", f"gpulab: --output {out_json}: {LINK}\n")
    assert victim.read_text(encoding="utf-8") == "precious\n"


def test_a_replaced_file_lends_only_its_permission_bits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: the whole mode copied, set-user-ID included, onto a file the runner (maybe root)
    # then owned.
    out_json = tmp_path / "out.json"
    out_json.write_text("{}\n", encoding="utf-8")
    out_json.chmod(0o4755)
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(out_json))
    assert (code, out, err) == (0, "", "")
    assert out_json.stat().st_mode & 0o7777 == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_file_another_user_planted_lends_no_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "out.json"
    out_json.write_text("{}\n", encoding="utf-8")
    out_json.chmod(0o666)
    os.chown(out_json, 4242, 4242)
    umask = os.umask(0o022)
    try:
        path = write_graph(tmp_path, small_graph())
        code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(out_json))
    finally:
        os.umask(umask)
    assert (code, out, err) == (0, "", "")
    status = out_json.stat()
    assert (status.st_uid, status.st_mode & 0o777) == (0, 0o644)


def test_a_full_disk_is_exit_4_and_keeps_the_previous_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out_json = tmp_path / "out.json"
    out_json.write_text("{}\n", encoding="utf-8")

    def full(handle: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(result_file.os, "fsync", full)
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(out_json))
    assert (code, out) == (4, "")
    assert err == (
        f"gpulab: --output {out_json}: cannot write the result: No space left on device; "
        "the previous file is unchanged\n"
    )
    assert out_json.read_text(encoding="utf-8") == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.json", "out.json"]


def test_a_new_file_and_dev_stdout_still_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_graph(tmp_path, small_graph())
    out_json = tmp_path / "new.json"
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(out_json))
    assert (code, out, err) == (0, "", "")
    assert json.loads(out_json.read_text(encoding="utf-8"))["graph"] == "small"
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", "/dev/stdout")
    assert (code, err) == (0, "")
    assert json.loads(out)["graph"] == "small"


def large_result_graph(elements: int) -> dict[str, Any]:
    return {
        "version": 1,
        "name": "large",
        "inputs": {"x": {"type": "vector", "fill": {"n": elements, "value": 1.5}}},
        "nodes": [{"id": "s", "op": "scale", "inputs": {"x": "x", "a": 3.0}}],
        "outputs": ["s"],
    }


def temporary_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_sigterm_while_the_result_is_written_removes_the_temporary_file(tmp_path: Path) -> None:
    # Was: scancel or a preemption (SIGTERM) in the write left `.out.json.XXXX.tmp` behind.
    path = write_graph(tmp_path, large_result_graph(4 << 20))
    out_json = tmp_path / "out.json"
    out_json.write_text('{"an": "earlier result"}\n', encoding="utf-8")
    with subprocess.Popen(
        [*GPULAB, "run", str(path), "--backend", "cpu", "--full", "-o", str(out_json)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as running:
        deadline = time.monotonic() + 120
        while not temporary_files(tmp_path):
            assert running.poll() is None, running.communicate()
            assert time.monotonic() < deadline, "the write never started"
            time.sleep(0.01)
        running.send_signal(signal.SIGTERM)
        out, err = running.communicate(timeout=60)
    assert (running.returncode, out) == (143, ""), err
    assert err == "gpulab: stopped by SIGTERM\n"
    assert temporary_files(tmp_path) == []
    assert out_json.read_text(encoding="utf-8") == '{"an": "earlier result"}\n'
