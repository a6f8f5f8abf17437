"""Reading Slurm's output: job ids, exit codes, durations, job records."""

from __future__ import annotations

import pytest
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_jobs import (
    parse_duration,
    parse_exit_code,
    parse_job_id,
    parse_sacct_job,
    parse_scontrol_job,
    parse_squeue,
)


@pytest.mark.parametrize(
    ("text", "job_id"), [("42\n", "42"), ("42;gpulab\n", "42"), ("warn\n7\n", "7")]
)
def test_job_id(text: str, job_id: str) -> None:
    assert parse_job_id(text) == job_id


@pytest.mark.parametrize("text", ["", "\n", "Submitted batch job 42\n"])
def test_no_job_id(text: str) -> None:
    with pytest.raises(ValueError, match="no job id"):
        parse_job_id(text)


@pytest.mark.parametrize(
    ("text", "expected"), [("0:0", (0, 0)), ("3:0", (3, 0)), ("0:15", (0, 15)), ("", (None, None))]
)
def test_exit_code(text: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_exit_code(text) == expected


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
    assert parse_duration(text) == seconds


def test_scontrol_record_without_nodes() -> None:
    info = parse_scontrol_job(
        "9", "JobId=9 JobState=PENDING ExitCode=0:0 RunTime=00:00:00 NodeList=(null) StdOut=/o\n"
    )
    assert (info.state, info.nodes, info.stdout_path, info.finished) == (
        "PENDING",
        None,
        "/o",
        False,
    )


def test_sacct_skips_other_records() -> None:
    assert parse_sacct_job("9", "8|COMPLETED|0:0|1|w1\n") is None


def test_squeue_lines() -> None:
    assert parse_squeue("41 RUNNING\n\n43 PENDING\n") == [("41", "RUNNING"), ("43", "PENDING")]
