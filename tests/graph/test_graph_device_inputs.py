"""Inputs made where they are used: random, fill and linspace inputs that only Vulkan nodes
read are generated on the device, bit for bit the host's values; .npy files only Vulkan reads
are read by its executor (streamed, or through pinned memory); everything else is made on
the host. The result says which."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab import Result, Runner, load_graph
from gpulab.backends.vulkan import VulkanExecutor
from gpulab.graph.values import materialize, read_npy_into
from gpulab.running.inputs import plan_inputs
from gpulab.running.runner import split
from graph_helpers import EXAMPLES, needs_vulkan, subprocess_cli, write_graph

LACKS = "the device lacks shaderInt64 and shaderFloat64 (needed to match numpy bit for bit)"


def inputs_graph(**extra_inputs: Any) -> dict[str, Any]:
    """Each input read by one Vulkan node; the generated ones also graph outputs (read back)."""
    inputs: dict[str, Any] = {
        "r": {"type": "vector", "random": {"n": 5003, "seed": 21, "low": -3.0, "high": 0.5}},
        "m": {"type": "matrix", "random": {"rows": 33, "cols": 17, "seed": 5}},
        "l": {"type": "vector", "linspace": {"n": 999, "start": -1.5, "stop": 2.25}},
        "f": {"type": "vector", "fill": {"n": 77, "value": -0.1}},
        "d": {"type": "vector", "data": [1.0, 2.0, 3.0]},
        "a": {"type": "scalar", "value": 0.5},
        **extra_inputs,
    }
    nodes = [
        {"id": f"sum_{name}", "op": "sum", "inputs": {"x": name}}
        for name, spec in inputs.items()
        if spec["type"] == "vector"
    ]
    nodes.append({"id": "mv", "op": "matvec", "inputs": {"A": "m", "x": "ones"}})
    nodes.append({"id": "half", "op": "scale", "inputs": {"x": "d", "a": "a"}})
    inputs["ones"] = {"type": "vector", "fill": {"n": 17, "value": 1.0}}
    outputs = ["r", "m", "l", "f", *(node["id"] for node in nodes)]
    return {"version": 1, "name": "inputs", "inputs": inputs, "nodes": nodes, "outputs": outputs}


def assert_bitwise(got: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], name: str) -> None:
    assert got.shape == expected.shape, name
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32)), name


def run(graph: dict[str, Any], backend: str = "vulkan") -> Result:
    with Runner(backend) as runner:
        return runner.run(load_graph(graph))


@needs_vulkan
def test_generated_inputs_are_the_host_values_bit_for_bit() -> None:
    graph = inputs_graph()
    result = run(graph)
    assert result.inputs == {
        "r": {"source": "random", "made_on": "device"},
        "m": {"source": "random", "made_on": "device"},
        "l": {"source": "linspace", "made_on": "device"},
        "f": {"source": "fill", "made_on": "device"},
        "d": {"source": "data", "made_on": "host"},
        "a": {"source": "value", "made_on": "host"},
        "ones": {"source": "fill", "made_on": "device"},
    }
    loaded = load_graph(graph)
    for name in ("r", "m", "l", "f"):
        assert_bitwise(result.outputs[name], materialize(loaded.inputs[name]), name)
    on_host = run(graph, "cpu")
    assert set(on_host.inputs) == set(result.inputs)
    assert {entry["made_on"] for entry in on_host.inputs.values()} == {"host"}
    for name in ("sum_r", "sum_l", "sum_f", "mv", "half"):
        np.testing.assert_allclose(result.outputs[name], on_host.outputs[name], rtol=1e-5)


@needs_vulkan
def test_an_input_also_read_on_cpu_is_made_on_the_host_and_says_why() -> None:
    graph = inputs_graph()
    graph["nodes"].append({"id": "cpu_r", "op": "max", "inputs": {"x": "r"}, "backend": "cpu"})
    graph["outputs"].append("cpu_r")
    result = run(graph)
    assert result.inputs["r"] == {
        "source": "random",
        "made_on": "host",
        "reason": "also read on cpu",
    }
    assert result.inputs["l"]["made_on"] == "device"
    assert_bitwise(result.outputs["r"], materialize(load_graph(graph).inputs["r"]), "r")


@needs_vulkan
def test_without_64_bit_features_random_and_linspace_fall_back_to_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The device is made without shaderInt64/shaderFloat64, as on a device that lacks them.
    monkeypatch.setattr("gpulab.vk.device.OPTIONAL_FEATURES", ())
    graph = inputs_graph()
    result = run(graph)
    for name, source in (("r", "random"), ("m", "random"), ("l", "linspace")):
        assert result.inputs[name] == {"source": source, "made_on": "host", "reason": LACKS}
    assert result.inputs["f"] == {"source": "fill", "made_on": "device"}  # bits only
    loaded = load_graph(graph)
    for name in ("r", "m", "l", "f"):
        assert_bitwise(result.outputs[name], materialize(loaded.inputs[name]), name)


@needs_vulkan
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_examples_give_the_same_bits_with_inputs_made_on_either_side(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = load_graph(path)
    with Runner("vulkan") as runner:
        device_made = runner.run(graph)
    monkeypatch.setattr("gpulab.vk.device.OPTIONAL_FEATURES", ())
    with Runner("vulkan") as runner:
        host_made = runner.run(graph)
    assert device_made.outputs.keys() == host_made.outputs.keys()
    for name, value in device_made.outputs.items():
        assert_bitwise(value, host_made.outputs[name], name)


@needs_vulkan
def test_a_new_seed_is_not_served_by_the_recording_of_the_old_one() -> None:
    first, second = inputs_graph(), inputs_graph()
    second["inputs"]["r"]["random"]["seed"] = 22
    with Runner("vulkan") as runner:
        for graph in (first, second, first):
            result = runner.run(load_graph(graph))
            expected = materialize(load_graph(graph).inputs["r"])
            assert_bitwise(result.outputs["r"], expected, "r")
        executor = runner.executor("vulkan")
        assert isinstance(executor, VulkanExecutor)
        assert executor.recorded == 2  # the third run replays the first recording


@needs_vulkan
def test_generation_time_is_the_segments_inputs_phase() -> None:
    graph = load_graph(inputs_graph())
    ((where, segment),) = split(graph, "vulkan")
    with Runner("vulkan") as runner:
        executor = runner.executor("vulkan")
        assert isinstance(executor, VulkanExecutor)
        plan = plan_inputs(
            graph, [(where, segment)], lambda _, p, n: executor.cannot_generate(p, n)
        )
        made = plan.made_by(segment)
        assert made.keys() == {"r", "m", "l", "f", "ones"}
        values = {name: materialize(graph.inputs[name]) for name in ("d", "a")}
        done = executor.execute(segment, values, made)
    assert where == "vulkan"
    assert done.phases["inputs_ms"] >= 0.0
    assert set(done.values) >= {"r", "m", "l", "f", "mv"}


def npy_graph(tmp_path: Path, array: np.ndarray[Any, Any], also_cpu: bool = False) -> Path:
    np.save(tmp_path / "x.npy", array)
    nodes: list[dict[str, Any]] = [{"id": "s", "op": "scale", "inputs": {"x": "x", "a": 1.0}}]
    if also_cpu:
        nodes.append({"id": "c", "op": "sum", "inputs": {"x": "x"}, "backend": "cpu"})
    graph = {
        "version": 1,
        "inputs": {"x": {"type": "vector", "file": "x.npy"}},
        "nodes": nodes,
        "outputs": [node["id"] for node in nodes],
    }
    return write_graph(tmp_path, graph)


@needs_vulkan
@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f8", "<i4"])
def test_npy_inputs_only_vulkan_reads_are_read_by_its_executor(tmp_path: Path, dtype: str) -> None:
    array = (np.arange(4099) * 0.37 - 300).astype(dtype)
    path = npy_graph(tmp_path, array)
    with Runner("vulkan") as runner:
        result = runner.run(load_graph(path))
        executor = runner.executor("vulkan")
        assert isinstance(executor, VulkanExecutor)
        uploads = executor.session.stager.counts["upload"]
    assert result.inputs["x"]["source"] == "file"
    assert result.inputs["x"]["made_on"] == "host"
    # float32 streamed from the file (test_graph_npy_stream.py), the rest read into pinned
    # memory and copied by the device; never through a pageable array.
    streamed = uploads["file"] + uploads["file_direct"]
    assert (streamed, uploads["pinned"]) == ((1, 0) if dtype == "<f4" else (0, 1))
    assert uploads["staged"] + uploads["direct"] == 0
    assert_bitwise(result.outputs["s"], array.astype(np.float32), "s")


@needs_vulkan
def test_npy_inputs_also_read_on_cpu_are_loaded_once_on_the_host(tmp_path: Path) -> None:
    array = np.linspace(-1, 1, 1000, dtype=np.float32)
    with Runner("vulkan") as runner:
        result = runner.run(load_graph(npy_graph(tmp_path, array, also_cpu=True)))
        executor = runner.executor("vulkan")
        assert isinstance(executor, VulkanExecutor)
        uploads = executor.session.stager.counts["upload"]
    assert uploads["pinned"] == 0
    assert_bitwise(result.outputs["s"], array, "s")


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f8", "<u2"])
def test_read_npy_into_matches_numpy_load(tmp_path: Path, dtype: str, order: str) -> None:
    array = np.asarray(np.arange(35).reshape(5, 7) * 1.25 + 3, dtype=dtype, order=order)
    np.save(tmp_path / "a.npy", array)
    out = np.empty((5, 7), dtype=np.float32)
    read_npy_into(tmp_path / "a.npy", out)
    assert_bitwise(out, np.load(tmp_path / "a.npy").astype(np.float32), "a")


def test_read_npy_into_refuses_a_file_of_another_shape(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros(6, dtype=np.float32))
    with pytest.raises(ValueError, match=r"holds shape \(6,\), expected \(5,\)"):
        read_npy_into(tmp_path / "a.npy", np.empty(5, dtype=np.float32))


@needs_vulkan
def test_gpulab_run_reports_inputs(tmp_path: Path) -> None:
    output = tmp_path / "result.json"
    done = subprocess_cli(
        "run", str(EXAMPLES / "saxpy_norm.json"), "--backend", "vulkan", "--output", str(output)
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(output.read_text())
    assert result["inputs"] == {
        "x": {"source": "random", "made_on": "device"},
        "y": {"source": "random", "made_on": "device"},
        "a": {"source": "value", "made_on": "host"},
    }
    cpu = subprocess_cli("run", str(EXAMPLES / "saxpy_norm.json"), "--backend", "cpu")
    assert cpu.returncode == 0, cpu.stderr
    assert json.loads(cpu.stdout)["inputs"]["x"] == {"source": "random", "made_on": "host"}


@needs_vulkan
def test_a_replayed_recording_reads_the_file_of_this_run(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    arrays = [np.full(512, 1.5, dtype=np.float32), np.arange(512, dtype=np.float32)]
    paths = [npy_graph(first, arrays[0]), npy_graph(second, arrays[1])]
    with Runner("vulkan") as runner:
        for path, array in zip([*paths, paths[0]], [*arrays, arrays[0]], strict=True):
            assert_bitwise(runner.run(load_graph(path)).outputs["s"], array, str(path))
        executor = runner.executor("vulkan")
        assert isinstance(executor, VulkanExecutor)
        assert executor.recorded == 1
