"""`gpulab run` starts the Vulkan driver on a second thread: one shared instance, whichever
thread asks first, and nothing started for cpu or native runs."""

from __future__ import annotations

import threading

import pytest
from gpulab.cli import run as cli_run
from gpulab.running import early
from gpulab.running.early import (
    WORKER_ENV,
    finish_early,
    run_request,
    start_for_command_line,
    start_vulkan,
)
from gpulab.vk import shared_instance

from tests.payload.test_cli import gpulab, no_driver_env


def test_cpu_and_native_runs_start_no_driver() -> None:
    assert start_vulkan("cpu") is None
    assert start_vulkan("native") is None


def test_the_early_thread_makes_the_instance_the_run_then_uses() -> None:
    early = start_vulkan("vulkan")
    assert early is not None
    early.join()
    instance = shared_instance()
    assert shared_instance() is instance
    assert instance.physical_devices()[0] is instance.physical_devices()[0]


def test_threads_asking_at_once_share_one_instance_and_one_device_list() -> None:
    found: list[object] = []
    start = threading.Barrier(4)

    def ask() -> None:
        start.wait()
        instance = shared_instance()
        found.append((instance, instance.physical_devices()[0]))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4
    assert len({id(instance) for instance, _ in found}) == 1
    assert len({id(device) for _, device in found}) == 1


def test_a_run_without_a_driver_still_says_why_in_one_line() -> None:
    # The early thread meets the missing driver first and keeps quiet; the run reports it.
    done = gpulab(
        "run", "payload/examples/saxpy_norm.json", "--backend", "vulkan", env=no_driver_env()
    )
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1


def test_the_command_line_is_read_for_the_run_it_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKER_ENV, raising=False)
    assert run_request(["run", "g.json"]) == ("auto", None)
    assert run_request(["run", "g.json", "--backend", "cpu", "-o", "r.json"]) == ("cpu", None)
    assert run_request(["run", "--backend=vulkan", "g.json", "--device", "1"]) == ("vulkan", 1)
    assert run_request(["run", "g.json", "--device=2", "--full"]) == ("auto", 2)
    assert run_request(["run", "g.json", "--", "--backend", "cpu"]) == ("auto", None)
    # Left to the run itself: other commands, a worker's runs, spellings read differently.
    assert run_request(["validate", "g.json"]) is None
    assert run_request([]) is None
    assert run_request(["run", "g.json", "--worker", "s.sock"]) is None
    assert run_request(["run", "g.json", "--back", "cpu"]) is None
    assert run_request(["run", "g.json", "--device", "first"]) is None
    monkeypatch.setenv(WORKER_ENV, "s.sock")
    assert run_request(["run", "g.json"]) is None
    assert WORKER_ENV == cli_run.WORKER_ENV


def test_the_run_takes_over_the_thread_the_command_line_started() -> None:
    start_for_command_line(["run", "g.json", "--backend", "vulkan"])
    started = early._started
    assert started is not None
    # Whatever the parsed flags say, the run ends that thread (finish_early releases its
    # device when nothing took it).
    assert start_vulkan("cpu") is started
    assert early._started is None
    finish_early(started)
    assert not started.is_alive()
    assert start_vulkan("cpu") is None


def test_a_bad_flag_after_the_early_start_is_still_exit_2() -> None:
    done = gpulab("run", "payload/examples/saxpy_norm.json", "--backend", "vulkan", "--nope")
    assert done.returncode == 2
    assert "unrecognized arguments: --nope" in done.stderr
