"""Progress output: a bar redrawn with `\\r` on a terminal (a real pseudo-terminal here), plain
lines in a file or pipe such as a Slurm job's log."""

from __future__ import annotations

import io
import os
import subprocess

from gpulab.diagnostics.progress import Progress

from tests.payload.test_cli import GPULAB


def run_steps(progress: Progress) -> None:
    progress.step("vulkan copy n=1024")
    progress.step("dispatch overhead")
    progress.finish()


def _read_all(leader: int) -> bytes:
    """Everything written to the pseudo-terminal: one read may return only the first write's
    bytes; once the other end is closed and drained, Linux answers EIO."""
    chunks = []
    try:
        while chunk := os.read(leader, 4096):
            chunks.append(chunk)
    except OSError:
        pass
    finally:
        os.close(leader)
    return b"".join(chunks)


def test_a_file_or_pipe_gets_one_plain_line_per_step() -> None:
    log = io.StringIO()
    run_steps(Progress(2, log))
    assert log.getvalue() == ("gpulab: [1/2] vulkan copy n=1024\ngpulab: [2/2] dispatch overhead\n")


def test_a_terminal_gets_a_bar_redrawn_in_place() -> None:
    leader, follower = os.openpty()
    with open(follower, "w", encoding="utf-8") as terminal:
        assert terminal.isatty()
        run_steps(Progress(2, terminal))
    text = _read_all(leader).decode()
    bar = "#" * 15 + "." * 15
    # The terminal turns "\n" into "\r\n" (onlcr): the bar's lines start with "\r" regardless.
    assert text.startswith(f"\r[{bar}] 1/2 vulkan copy n=1024")
    assert f"\r[{'#' * 30}] 2/2 dispatch overhead" in text
    assert text.count("\n") == 1


def test_bench_writes_no_carriage_return_into_a_log() -> None:
    """`gpulab bench` with stderr in a file, as under sbatch: plain lines only."""
    done = subprocess.run(
        [*GPULAB, "bench", "--ops", "copy", "--sizes", "1024", "--no-overhead"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr
    assert "gpulab: [1/1] vulkan copy n=1024\n" in done.stderr
