"""The Vulkan backend on a real device (lavapipe in CI): one recording per segment, reused;
intermediates released through the pool; GPU timestamps; memory statistics; errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab import Runner, load_graph
from gpulab.backends.vulkan import VulkanExecutor
from gpulab.ops import NumericalError, reference
from gpulab.placement.device_choice import choose_device
from gpulab.vk import live_handles
from graph_helpers import EXAMPLES, cli, needs_vulkan, subprocess_cli, write_graph

pytestmark = needs_vulkan


def chain(n: int, length: int) -> dict[str, Any]:
    """x -> scale -> add -> scale -> ... : each intermediate read once, then free."""
    nodes: list[dict[str, Any]] = []
    previous = "x"
    for i in range(length):
        if i % 2:
            nodes.append({"id": f"v{i}", "op": "add", "inputs": {"x": previous, "y": "x"}})
        else:
            nodes.append({"id": f"v{i}", "op": "scale", "inputs": {"x": previous, "a": 0.5}})
        previous = f"v{i}"
    nodes.append({"id": "total", "op": "sum", "inputs": {"x": previous}})
    return {
        "version": 1,
        "name": "chain",
        "inputs": {"x": {"type": "vector", "random": {"n": n, "seed": 3}}},
        "nodes": nodes,
        "outputs": [previous, "total"],
    }


def host_chain(x: np.ndarray[Any, np.dtype[np.float32]], length: int) -> Any:
    value = x
    for i in range(length):
        value = reference.add(value, x) if i % 2 else reference.scale(value, 0.5)
    return value


def test_recording_is_reused_and_intermediates_share_memory() -> None:
    graph = load_graph(chain(10_000, 8))
    x = np.random.default_rng(3).uniform(0, 1, 10_000).astype(np.float32)
    # Unfused: each intermediate is written over the one before (elementwise ops, in place),
    # x stays whole (every add reads it) and v7 is kept: three vectors for nine nodes.
    with Runner("vulkan", fuse=False) as runner:
        first = runner.run(graph)
        second = runner.run(graph)
        executor = runner.executor("vulkan")
        assert isinstance(executor, VulkanExecutor)
        assert executor.recorded == 1
        pool = first.memory["pool"] if first.memory else {}
    np.testing.assert_allclose(first.outputs["v7"], host_chain(x, 8), rtol=1e-6)
    np.testing.assert_array_equal(first.outputs["v7"], second.outputs["v7"])
    vector = 4 * 10_000
    assert pool["misses"] <= 5 and pool["in_use_bytes"] + pool["cached_bytes"] < 4 * vector, pool
    assert [n.timer for n in first.nodes] == ["gpu"] * 9
    assert all(n.time_ms > 0 for n in first.nodes)
    assert first.dispatches is not None and first.dispatches >= 9
    assert first.fusion == "off (--no-fuse)" and first.fused == []


def test_a_chain_and_its_sum_run_as_one_shader() -> None:
    graph = load_graph(chain(10_000, 8))
    x = np.random.default_rng(3).uniform(0, 1, 10_000).astype(np.float32)
    with Runner("vulkan") as runner:
        fused = runner.run(graph)
    with Runner("vulkan", fuse=False) as runner:
        unfused = runner.run(graph)
    assert fused.fusion == "on"
    assert fused.fused == [[*(f"v{i}" for i in range(8)), "total"]]
    # One pass over the elements, then the reduction's combining passes.
    assert fused.dispatches is not None and unfused.dispatches is not None
    assert fused.dispatches == unfused.dispatches - 8
    np.testing.assert_allclose(fused.outputs["v7"], host_chain(x, 8), rtol=1e-6)
    np.testing.assert_allclose(fused.outputs["total"], unfused.outputs["total"], rtol=1e-5)
    # Only v7 (an output) and total were written: no intermediate took memory.
    assert fused.memory is not None and unfused.memory is not None
    assert fused.memory["pool"]["misses"] < unfused.memory["pool"]["misses"]
    document = fused.to_json()
    assert document["timing"]["dispatches"] == fused.dispatches
    assert document["fused"] == fused.fused and document["fusion"] == "on"


def test_new_input_values_reuse_the_recording(tmp_path: Path) -> None:
    with Runner("vulkan") as runner:
        results = []
        for value in (1.0, 2.0):
            np.save(tmp_path / "v.npy", np.full(64, value))
            graph = load_graph(
                write_graph(
                    tmp_path,
                    {
                        "version": 1,
                        "inputs": {"v": {"type": "vector", "file": "v.npy"}},
                        "nodes": [{"id": "s", "op": "sum", "inputs": {"x": "v"}}],
                        "outputs": ["s"],
                    },
                )
            )
            results.append(float(runner.run(graph).outputs["s"]))
        executor = runner.executor("vulkan")
        assert isinstance(executor, VulkanExecutor)
        assert executor.recorded == 1
    assert results == [64.0, 128.0]


def test_scalars_stay_on_the_device_and_cross_backends() -> None:
    graph = load_graph(
        {
            "version": 1,
            "inputs": {"x": {"type": "vector", "linspace": {"n": 1000, "start": -1, "stop": 2}}},
            "nodes": [
                {"id": "norm", "op": "l2_norm", "inputs": {"x": "x"}},
                {"id": "unit", "op": "scale", "inputs": {"x": "x", "a": "norm"}},
                {"id": "m", "op": "max", "inputs": {"x": "unit"}, "backend": "cpu"},
                {"id": "back", "op": "scale", "inputs": {"x": "unit", "a": "m"}},
            ],
            "outputs": ["back"],
        }
    )
    with Runner("vulkan") as runner:
        result = runner.run(graph)
    assert [n.backend for n in result.nodes] == ["vulkan", "vulkan", "cpu", "vulkan"]
    assert result.transfers == [
        {"value": "unit", "from": "vulkan", "to": "cpu"},
        {"value": "m", "from": "cpu", "to": "vulkan"},
    ]
    x = np.linspace(-1, 2, 1000).astype(np.float32)
    unit = reference.scale(x, float(reference.l2_norm(x)))
    expected = reference.scale(unit, float(reference.max(unit)))
    np.testing.assert_allclose(result.outputs["back"], expected, rtol=1e-5)


def test_zero_norm_is_reported_like_on_cpu() -> None:
    graph = load_graph(
        {
            "version": 1,
            "inputs": {"z": {"type": "vector", "fill": {"n": 16, "value": 0.0}}},
            "nodes": [{"id": "u", "op": "normalize", "inputs": {"x": "z"}}],
            "outputs": ["u"],
        }
    )
    with Runner("vulkan") as runner, pytest.raises(NumericalError, match="norm 0"):
        runner.run(graph)


def test_runs_leave_no_vulkan_objects_behind() -> None:
    before = live_handles()
    with Runner("vulkan") as runner:
        runner.run(load_graph(EXAMPLES / "branching_normalize.json"))
    assert live_handles() == before


def test_cli_vulkan_result_has_memory_and_gpu_times(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "run", str(EXAMPLES / "jacobi.json"), "--backend", "vulkan")
    assert code == 0, err
    document = json.loads(out)
    assert document["backend"] == "vulkan"
    choice = choose_device(None)  # the device a run picks here: lavapipe in CI, else a GPU
    chosen = choice.infos[choice.index]
    assert (document["device"]["name"], document["device"]["type"]) == (chosen.name, chosen.type)
    assert {"in_use_bytes", "peak_in_use_bytes", "pool"} <= document["memory"].keys()
    assert {n["timer"] for n in document["nodes"]} == {"gpu"}


def test_auto_says_what_it_chose(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "run", str(EXAMPLES / "matrix_ops.json"))
    assert code == 0
    assert err.startswith("gpulab: auto chose vulkan: device 0 is ")
    document = json.loads(out)
    assert (document["backend"], document["backend_requested"]) == ("vulkan", "auto")


def test_no_device_is_exit_3_and_auto_falls_back_to_cpu() -> None:
    env = dict(
        os.environ, VK_ICD_FILENAMES="/nonexistent.json", VK_DRIVER_FILES="/nonexistent.json"
    )
    # Without a driver there is nothing to validate, and the loader's "Found no drivers!" would
    # come first on stderr (and to the validation net) where this test reads gpulab's line.
    env.pop("GPULAB_VK_VALIDATION", None)
    path = str(EXAMPLES / "jacobi.json")
    done = subprocess_cli("run", path, "--backend", "vulkan", env=env)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("gpulab: the Vulkan backend is unavailable: ")
    assert "Traceback" not in done.stderr
    fallback = subprocess_cli("run", path, env=env)
    assert fallback.returncode == 0, fallback.stderr
    assert "auto chose cpu: no Vulkan device was found" in fallback.stderr
    assert json.loads(fallback.stdout)["backend"] == "cpu"


def test_missing_device_index_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(
        capsys, "run", str(EXAMPLES / "jacobi.json"), "--backend", "vulkan", "--device", "7"
    )
    assert code == 3
    assert err.startswith("gpulab: there is no Vulkan device 7 (found ")


def test_zero_norm_cli_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = {
        "version": 1,
        "inputs": {"z": {"type": "vector", "fill": {"n": 8, "value": 0.0}}},
        "nodes": [{"id": "u", "op": "normalize", "inputs": {"x": "z"}}],
        "outputs": ["u"],
    }
    code, out, err = cli(capsys, "run", str(write_graph(tmp_path, graph)), "--backend", "vulkan")
    assert (code, out) == (4, "")
    assert err == "gpulab: numerical failure: normalize: x has norm 0 (node 'u')\n"


def test_graph_larger_than_host_memory_is_invalid_on_vulkan_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpulab.backends.select import vulkan_devices  # noqa: PLC0415

    assert vulkan_devices()
    graph = {
        "version": 1,
        "inputs": {"x": {"type": "vector", "fill": {"n": 1 << 40, "value": 1.0}}},
        "nodes": [{"id": "s", "op": "sum", "inputs": {"x": "x"}}],
        "outputs": ["s"],
    }
    path = write_graph(tmp_path, graph)
    code, out, err = cli(capsys, "run", str(path), "--backend", "vulkan")
    assert (code, out) == (2, "")
    assert err.startswith(
        f"gpulab: {path}: inputs.x: [1099511627776] float32 values need 4096.00 GiB"
    )
    # Larger than the host: invalid anywhere (exit 2). Larger than only the device is a run
    # failure (exit 4) or, under auto, a fall back: tests/payload/test_cli_memory.py.
    assert "host memory exist" in err
