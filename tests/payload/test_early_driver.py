"""`gpulab run` starts the Vulkan driver on a second thread: one shared instance, whichever
thread asks first, and nothing started for cpu or native runs; the device it opens ahead, and
the memory it allocates there once the graph is loaded, go to the run's session or are freed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from gpulab.graph import load_graph
from gpulab.kernels import DeviceSession
from gpulab.memory import MemoryManager
from gpulab.running.early import MOST_VALUES, start_vulkan, values_ahead
from gpulab.vk import live_handles, shared_instance

from tests.payload.test_cli import gpulab, no_driver_env

MIB = 1 << 20
LARGE = 160 * MIB
"""Above half of the 256 MiB blocks of lavapipe's heap: a dedicated block."""


def test_cpu_and_native_runs_start_no_driver() -> None:
    assert start_vulkan("cpu") is None
    assert start_vulkan("native") is None


def test_the_early_thread_makes_the_instance_the_run_then_uses() -> None:
    early = start_vulkan("vulkan")
    assert early is not None
    early.finish()
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


def test_the_session_takes_the_device_and_the_memory_made_ahead() -> None:
    memories_before = live_handles().get("DeviceMemory", 0)
    early = start_vulkan("vulkan", open_ahead=True)
    assert early is not None
    early.allocate_for([(LARGE, "device"), (MIB, "device")])  # the small one: no block ahead
    with DeviceSession(0) as session:
        allocation = session.manager.allocate(LARGE)
        assert session.manager.taken_ahead == 1
        allocation.free()
    early.finish()
    assert live_handles().get("DeviceMemory", 0) == memories_before


def test_memory_made_ahead_for_a_run_that_never_opens_the_device_is_freed() -> None:
    before = live_handles()
    early = start_vulkan("vulkan", open_ahead=True)
    assert early is not None
    early.allocate_for([(LARGE, "device")])
    early.allocate_for([(LARGE, "device")])  # once only
    early.finish()
    after = live_handles()
    assert {k: after.get(k, 0) for k in ("Device", "DeviceMemory")} == {
        k: before.get(k, 0) for k in ("Device", "DeviceMemory")
    }


def test_a_run_on_large_vectors_uses_the_memory_made_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    taken: list[int] = []
    release = MemoryManager.release_ahead

    def spy(manager: MemoryManager) -> None:
        taken.append(manager.taken_ahead)
        release(manager)

    monkeypatch.setattr(MemoryManager, "release_ahead", spy)
    n = LARGE // 4
    graph = {
        "version": 1,
        "inputs": {"x": {"type": "vector", "fill": {"n": n, "value": 0.5}}},
        "nodes": [
            {"id": "y", "op": "scale", "inputs": {"x": "x", "a": 4.0}},
            {"id": "total", "op": "sum", "inputs": {"x": "y"}},
        ],
        "outputs": ["total"],
    }
    (tmp_path / "g.json").write_text(json.dumps(graph))
    from gpulab.cli.main import main  # noqa: PLC0415

    code = main(["run", str(tmp_path / "g.json"), "--backend", "vulkan", "-o", "-"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["outputs"]["total"]["value"] == pytest.approx(2.0 * n, rel=1e-3)
    assert taken and taken[0] >= 1  # at least x's buffer came from the memory made ahead


def test_the_values_ahead_are_the_large_ones_with_their_memory_kind(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.ones(MIB, dtype=np.float32))
    graph = {
        "version": 1,
        "inputs": {
            "x": {"type": "vector", "file": "x.npy"},
            "small": {"type": "vector", "fill": {"n": 1000, "value": 1.0}},
            "a": {"type": "scalar", "value": 2.0},
        },
        "nodes": [
            {"id": "y", "op": "scale", "inputs": {"x": "x", "a": "a"}},
            {"id": "s", "op": "sum", "inputs": {"x": "small"}},
            {"id": "on_cpu", "op": "scale", "inputs": {"x": "x", "a": "a"}, "backend": "cpu"},
        ],
        "outputs": ["y", "s", "on_cpu"],
    }
    (tmp_path / "g.json").write_text(json.dumps(graph))
    assert values_ahead(load_graph(tmp_path / "g.json")) == [
        (4 * MIB, "device_mapped"),
        (4 * MIB, "device"),
    ]
    many = {
        **graph,
        "nodes": [
            {"id": f"y{i}", "op": "scale", "inputs": {"x": "x", "a": "a"}}
            for i in range(MOST_VALUES)
        ],
        "outputs": ["y0"],
    }
    (tmp_path / "many.json").write_text(json.dumps(many))
    assert values_ahead(load_graph(tmp_path / "many.json")) == []
