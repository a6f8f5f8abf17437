"""`gpulab metrics` as a command: the textfile, stdout, and the contract's exit codes."""

from __future__ import annotations

import os
from pathlib import Path

from tests.metrics.promtext import labels, parse
from tests.payload.test_cli import gpulab

# No sinfo or squeue on PATH: Slurm cannot answer.
NO_SLURM = {**os.environ, "PATH": "/nonexistent"}


def test_the_textfile_holds_the_gpu_metrics(tmp_path: Path) -> None:
    target = tmp_path / "gpulab.prom"
    done = gpulab("metrics", "--gpu", "--bench-elements", "0", "--textfile", str(target))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    samples, _ = parse(target.read_text())
    assert samples["gpulab_gpu_health_ok"][labels(device="0")] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["gpulab.prom"]


def test_slurm_metrics_without_slurm_say_slurm_is_down() -> None:
    done = gpulab("metrics", "--slurm", env=NO_SLURM)
    assert done.returncode == 0, done.stderr
    samples, _ = parse(done.stdout)
    assert samples == {"gpulab_slurm_up": {labels(): 0}}


def test_bad_requests_exit_2_with_one_line(tmp_path: Path) -> None:
    for argv, message in (
        (["metrics"], "gpulab metrics: give --slurm, --gpu or both\n"),
        (
            ["metrics", "--gpu", "--textfile", str(tmp_path / "x.txt")],
            f"gpulab metrics: --textfile {tmp_path / 'x.txt'}: must end in .prom\n",
        ),
    ):
        done = gpulab(*argv)
        assert (done.returncode, done.stderr) == (2, message)
    done = gpulab("metrics", "--gpu", "--devices", "-1")
    assert done.returncode == 2
    assert "expected a count" in done.stderr


def test_an_unwritable_textfile_exits_4(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "gpulab.prom"
    done = gpulab("metrics", "--slurm", "--textfile", str(target), env=NO_SLURM)
    assert done.returncode == 4
    assert done.stderr == f"gpulab metrics: cannot write {target}: No such file or directory\n"
