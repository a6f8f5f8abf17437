"""The `gpulab` command starts a run's Vulkan driver from its bare command line (head_start),
only where its reading cannot differ from the parser's, and the run takes that thread."""

from __future__ import annotations

import os

import pytest
from gpulab.cli import head_start
from gpulab.running.early import finish_early

from tests.payload.test_cli import gpulab


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["run", "g.json"], ("auto", None)),
        (["run", "g.json", "--backend", "vulkan", "--device", "1"], ("vulkan", 1)),
        (["run", "--backend=cpu", "g.json", "-o", "r.json"], ("cpu", None)),
        (["run", "g.json", "--device=0", "--full", "--profile"], ("auto", 0)),
        (["run", "g.json", "--", "--backend"], ("auto", None)),
    ],
)
def test_a_plain_run_is_read_as_the_parser_reads_it(
    argv: list[str], wanted: tuple[str, int | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPULAB_WORKER", raising=False)
    assert head_start.read_run(argv) == wanted


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["devices"],
        ["bench", "--backend", "vulkan"],
        ["run", "g.json", "--back", "cpu"],  # argparse takes the abbreviation
        ["run", "g.json", "--dev", "1"],
        ["run", "g.json", "--device", "one"],
        ["run", "g.json", "--wo", "sock"],
        ["run", "g.json", "--worker=sock"],
        ["run", "-h"],
        ["run", "--he"],
    ],
)
def test_anything_else_is_left_to_the_parser(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPULAB_WORKER", raising=False)
    assert head_start.read_run(argv) is None


def test_a_run_for_a_worker_is_left_to_the_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAB_WORKER", "/run/gpulab.sock")
    assert head_start.read_run(["run", "g.json"]) is None


def test_a_cpu_run_starts_nothing_and_a_vulkan_run_hands_its_thread_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GPULAB_WORKER", raising=False)
    head_start.start(["run", "g.json", "--backend", "cpu"])
    assert head_start.take() is None
    head_start.start(["run", "g.json", "--backend", "vulkan"])
    thread = head_start.take()
    assert thread is not None
    assert head_start.take() is None  # taken once
    finish_early(thread)  # closes the device nobody took


def test_only_a_vulkan_run_spares_numpy_its_blas_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPULAB_WORKER", raising=False)
    monkeypatch.setenv(head_start.BLAS_THREADS_ENV, "set")  # restored after the test
    monkeypatch.delenv(head_start.BLAS_THREADS_ENV)
    for argv in (
        ["--backend", "cpu"],
        ["--backend", "native"],
        ["--backend", "auto"],
        ["--backend", "vulkan", "--compare", "cpu"],  # the comparison runs on the host
        ["--backend", "vulkan", "--comp=native"],
    ):
        head_start.start(["run", "g.json", *argv])
        finish_early(head_start.take())
        assert head_start.BLAS_THREADS_ENV not in os.environ, argv
    head_start.start(["run", "g.json", "--backend", "vulkan"])
    finish_early(head_start.take())
    assert os.environ[head_start.BLAS_THREADS_ENV] == "1"
    monkeypatch.setenv(head_start.BLAS_THREADS_ENV, "8")  # the user's choice stands
    head_start.start(["run", "g.json", "--backend", "vulkan"])
    finish_early(head_start.take())
    assert os.environ[head_start.BLAS_THREADS_ENV] == "8"


def test_bad_flags_still_exit_2_with_the_driver_started() -> None:
    done = gpulab("run", "payload/examples/saxpy_norm.json", "--backend", "vulkan", "--bogus")
    assert done.returncode == 2
    assert "unrecognized arguments: --bogus" in done.stderr


def test_a_run_through_the_command_uses_the_started_driver() -> None:
    done = gpulab("run", "payload/examples/saxpy_norm.json", "--backend", "vulkan", "-o", "-")
    assert done.returncode == 0, done.stderr
    assert '"backend": "vulkan"' in done.stdout
