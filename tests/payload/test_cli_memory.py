"""Graphs that do not fit in device memory: a clear exit 4 on vulkan, a reported fall back to
cpu under auto, and nothing left allocated afterwards. `--memory-budget` (or
GPULAB_MEMORY_BUDGET) caps lavapipe's heaps so that this is testable without a huge graph."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from gpulab.cli.run import memory_size
from gpulab.graph import load_graph
from gpulab.memory import OutOfMemoryError
from gpulab.running import Runner
from gpulab.vk import live_handles

from tests.graph.graph_helpers import cli, subprocess_cli, write_graph

MIB = 1 << 20
HEAP_LINE = "of device memory do not fit in heap "


def vector_sum(n: int, backend: str | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {"id": "s", "op": "sum", "inputs": {"x": "x"}}
    if backend:
        node["backend"] = backend
    return {
        "version": 1,
        "inputs": {"x": {"type": "vector", "fill": {"n": n, "value": 1.0}}},
        "nodes": [node],
        "outputs": ["s"],
    }


def scaled_sum(n: int) -> dict[str, Any]:
    """sum(2 x), and 2 x an output: x and 2 x are on the device at once (were 2 x not an output,
    scale and sum would fuse and 2 x never be written). x is also read on cpu: made on the
    host and uploaded (an input only Vulkan reads is generated on the device instead)."""
    graph = vector_sum(n)
    graph["nodes"] = [
        {"id": "t", "op": "scale", "inputs": {"x": "x", "a": 2.0}},
        {"id": "s", "op": "sum", "inputs": {"x": "t"}},
        {"id": "c", "op": "sum", "inputs": {"x": "x"}, "backend": "cpu"},
    ]
    graph["outputs"] += ["c", "t"]
    return graph


def test_a_value_larger_than_the_budget_is_exit_4_before_any_allocation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_graph(tmp_path, vector_sum(MIB))  # 4 MiB
    code, out, err = cli(capsys, "run", str(path), "--backend", "vulkan", "--memory-budget", "1M")
    assert (code, out) == (4, "")
    assert err == (
        "gpulab: run failed: value 'x': out of device memory: 4194304 bytes (4.0 MiB) "
        "of device memory do not fit in heap 0 (0.0 MiB of 1.0 MiB in use) or any other "
        "suitable memory type\n"
    )


def test_running_out_while_allocating_is_exit_4_naming_the_heap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each value fits the 6 MiB, x and 2 x together do not.
    path = write_graph(tmp_path, scaled_sum(MIB))
    code, out, err = cli(capsys, "run", str(path), "--backend", "vulkan", "--memory-budget", "6M")
    assert (code, out) == (4, "")
    assert err.startswith("gpulab: run failed: out of device memory: ")
    assert "memory do not fit in heap 0 (" in err
    assert len(err.splitlines()) == 1


def test_auto_falls_back_to_cpu_and_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_graph(tmp_path, vector_sum(MIB))
    code, out, err = cli(capsys, "run", str(path), "--memory-budget", "1MiB")
    assert code == 0, err
    result = json.loads(out)
    assert result["backend"] == "cpu"
    assert result["outputs"]["s"]["value"] == float(MIB)
    assert result["fallback"]["from"] == "vulkan"
    assert result["fallback"]["to"] == "cpu"
    assert HEAP_LINE in result["fallback"]["reason"]
    assert "fell back to cpu" in result["backend_reason"]
    assert "memory" not in result  # Vulkan did not run
    lines = err.splitlines()
    assert lines[0].startswith("gpulab: auto chose vulkan")
    assert lines[1].startswith("gpulab: ran on cpu instead of vulkan: value 'x': out of device")


def test_a_graph_that_fits_reports_no_fallback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_graph(tmp_path, vector_sum(1024))
    code, out, err = cli(capsys, "run", str(path), "--memory-budget", "64M")
    assert code == 0, err
    result = json.loads(out)
    assert result["backend"] == "vulkan"
    assert "fallback" not in result
    assert {heap["limit_bytes"] for heap in result["memory"]["heaps"].values()} == {64 * MIB}


def test_the_budget_comes_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPULAB_MEMORY_BUDGET", "1M")
    path = write_graph(tmp_path, vector_sum(MIB))
    code, out, _ = cli(capsys, "run", str(path))
    assert code == 0
    assert json.loads(out)["fallback"]["to"] == "cpu"


def test_a_malformed_budget_in_the_environment_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPULAB_MEMORY_BUDGET", "lots")
    path = write_graph(tmp_path, vector_sum(4))
    code, out, err = cli(capsys, "run", str(path))
    assert (code, out) == (2, "")
    assert err == (
        "gpulab: GPULAB_MEMORY_BUDGET: expected a number of bytes of at least 1 "
        "(such as 1048576, 64M, 2GiB), got 'lots'\n"
    )


def test_a_node_pinned_to_vulkan_does_not_fall_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_graph(tmp_path, vector_sum(MIB, backend="vulkan"))
    code, out, err = cli(capsys, "run", str(path), "--memory-budget", "1M")
    assert (code, out) == (4, "")
    assert err.splitlines()[-1].startswith("gpulab: run failed: value 'x': out of device memory")


def test_memory_is_released_after_running_out(tmp_path: Path) -> None:
    big = load_graph(scaled_sum(MIB))
    small = load_graph(vector_sum(1024))
    with Runner("vulkan", memory_budget=6 * MIB) as runner:
        with pytest.raises(OutOfMemoryError):
            runner.run(big)
        stats = runner.executor("vulkan").memory_stats()
        assert stats is not None
        assert stats["in_use_bytes"] == 0
        assert stats["allocated_bytes"] == 0
        # The device is still usable, with its whole budget.
        assert float(runner.run(small).outputs["s"]) == 1024.0


def test_the_fallback_closes_the_vulkan_executor_at_once() -> None:
    before = live_handles()
    with Runner("auto", memory_budget=MIB) as runner:
        result = runner.run(load_graph(vector_sum(MIB)))
        assert result.fallback is not None
        assert live_handles() == before  # no device, memory or pipeline left open
    assert float(result.outputs["s"]) == float(MIB)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1", 1),
        ("4096", 4096),
        ("64M", 64 * MIB),
        ("64MiB", 64 * MIB),
        ("2g", 2 << 30),
        ("1kb", 1024),
    ],
)
def test_memory_sizes(text: str, size: int) -> None:
    assert memory_size(text) == size


@pytest.mark.parametrize("text", ["0", "-1", "1.5G", "", "M", "12 parsecs", "9" * 40])
def test_malformed_memory_sizes(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        memory_size(text)


def test_device_out_of_memory_as_a_subprocess(tmp_path: Path) -> None:
    path = write_graph(tmp_path, vector_sum(MIB))
    done = subprocess_cli("run", str(path), "--backend", "vulkan", "--memory-budget", "1M")
    assert (done.returncode, done.stdout) == (4, "")
    assert done.stderr.startswith("gpulab: run failed: value 'x': out of device memory")
    assert "Traceback" not in done.stderr
