""".npy inputs that only Vulkan reads are streamed from the file into the device buffer
(Stager.upload_file): float32 C-order data as it is, through the staging ring (a discrete
GPU's VRAM the host cannot map) or straight into mapped memory (lavapipe's; VRAM behind a
resizable BAR); other dtypes and Fortran order go the pinned way. Either way the values are
numpy's, bit for bit; bad files are exit 2 with validate's lines, found by the load (as
`gpulab validate` finds them) or, where the graph was loaded with check_values=False (`gpulab
run` on Vulkan), by the device that read the file (the host, for the pinned way)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gpulab.graph.npy
import gpulab.memory.file_regions
import numpy as np
import pytest
from gpulab import Runner, load_graph
from gpulab.backends.vulkan import VulkanExecutor
from gpulab.graph import GraphInvalid
from gpulab.memory import Allocation
from gpulab.vk.memory import HOST_CACHED
from graph_helpers import cli, needs_vulkan, subprocess_cli, vector_graph, write_graph

CHUNK = 64 << 10
"""The file chunk for these tests (the smallest the Stager takes): files of a few hundred
KiB span several rings."""


@pytest.fixture(params=["ring", "mapped", "rebar"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Small file chunks, and the device's memory as: "ring", a discrete GPU whose VRAM the
    host cannot map (files go through the staging ring); "mapped", as it is (lavapipe's one
    host-cached type); "rebar", a discrete GPU behind a resizable BAR: a .npy input's buffer
    (kind device_mapped) is mapped but uncached, plain device memory is not mapped."""
    monkeypatch.setattr(gpulab.memory.file_regions, "FILE_CHUNK", CHUNK)
    mappable = Allocation.host_visible.fget
    memory_type = Allocation.memory_type.fget
    assert mappable is not None and memory_type is not None
    if request.param == "ring":
        monkeypatch.setattr(
            Allocation,
            "host_visible",
            property(lambda a: a.kind not in ("device", "device_mapped") and mappable(a)),
        )
    if request.param == "rebar":
        monkeypatch.setattr(
            Allocation, "host_visible", property(lambda a: a.kind != "device" and mappable(a))
        )
        uncached = property(
            lambda a: (
                dataclasses.replace(
                    memory_type(a), property_flags=memory_type(a).property_flags & ~HOST_CACHED
                )
                if a.kind == "device_mapped"
                else memory_type(a)
            )
        )
        monkeypatch.setattr(Allocation, "memory_type", uncached)
    yield str(request.param)


def matrix_graph(folder: Path, array: np.ndarray[Any, Any]) -> Path:
    """P = A @ I (exact: one product by 1 and additions of zeros per element)."""
    np.save(folder / "a.npy", array)
    cols = array.shape[1]
    graph = {
        "version": 1,
        "inputs": {
            "A": {"type": "matrix", "file": "a.npy"},
            "I": {"type": "matrix", "data": np.eye(cols).tolist()},
        },
        "nodes": [{"id": "P", "op": "matmul", "inputs": {"A": "A", "B": "I"}}],
        "outputs": ["P"],
    }
    return write_graph(folder, graph)


def streamed_path(way: str) -> str:
    """Where a streamed file went: the ring ("file"), or straight into the input's mapped
    buffer ("file_direct"). Its values are checked on the device when the load did not
    check them, so no host read of uncached memory ever keeps a file off the direct way."""
    return "file" if way == "ring" else "file_direct"


def run_vulkan(path: Path, check_values: bool = False) -> tuple[Any, dict[str, int]]:
    with Runner("vulkan") as runner:
        executor = runner.executor("vulkan")
        assert isinstance(executor, VulkanExecutor)
        stager = executor.session.stager
        stager.threads, stager.threaded_from = 3, 0  # the threaded pipeline
        result = runner.run(load_graph(path, check_values=check_values))
        return result, dict(stager.counts["upload"])


def expected(path: Path) -> np.ndarray[Any, Any]:
    return np.load(path).astype(np.float32)


def same_bits(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    assert got.shape == want.shape
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


# 7 chunks and a bit: not a multiple of the chunk, several rings (3 + 2 slots) long.
N = 7 * CHUNK // 4 + 1001


@needs_vulkan
@pytest.mark.parametrize("check_values", [False, True])
def test_float32_files_are_streamed_bit_for_bit(
    tmp_path: Path, way: str, check_values: bool
) -> None:
    array = np.random.default_rng(3).standard_normal(N).astype("<f4")
    array[5] = -0.0
    array[N - 1] = np.float32(3.4e38)  # the largest magnitudes pass
    result, counts = run_vulkan(vector_graph(tmp_path, array), check_values)
    same_bits(result.outputs["s"], array)
    assert result.inputs["x"] == {"source": "file", "made_on": "host", "read": "streamed"}
    assert counts[streamed_path(way)] == 1
    assert counts["pinned"] == 0


@needs_vulkan
@pytest.mark.parametrize(
    ("dtype", "why"),
    [
        (">f4", "holds >f4, converted to float32 on the host"),
        ("<f8", "holds <f8, converted to float32 on the host"),
        ("<f2", "holds <f2, converted to float32 on the host"),
        ("<i4", "holds <i4, converted to float32 on the host"),
        ("<u2", "holds <u2, converted to float32 on the host"),
    ],
)
def test_other_dtypes_go_the_pinned_way(tmp_path: Path, way: str, dtype: str, why: str) -> None:
    array = (np.arange(N) * 0.37 - 300).astype(dtype) if "u" not in dtype else np.arange(N) % 999
    array = array.astype(dtype)
    path = vector_graph(tmp_path, array)
    result, counts = run_vulkan(path)
    same_bits(result.outputs["s"], expected(tmp_path / "x.npy"))
    assert result.inputs["x"] == {
        "source": "file",
        "made_on": "host",
        "read": "pinned",
        "not_streamed": why,
    }
    assert (counts["pinned"], counts["file"], counts["file_direct"]) == (1, 0, 0)


@needs_vulkan
@pytest.mark.parametrize("order", ["C", "F"])
def test_matrices_stream_in_c_order_and_fortran_order_goes_the_pinned_way(
    tmp_path: Path, way: str, order: str
) -> None:
    array = np.asarray(
        np.random.default_rng(4).uniform(1.0, 2.0, (3001, 33)), dtype=np.float32, order=order
    )
    result, _ = run_vulkan(matrix_graph(tmp_path, array))
    same_bits(result.outputs["P"], expected(tmp_path / "a.npy"))
    read = result.inputs["A"]
    if order == "C":
        assert read["read"] == "streamed"
    else:
        assert read["not_streamed"] == "is in Fortran order, transposed on the host"


@needs_vulkan
@pytest.mark.parametrize("dtype", ["<f4", "<f8"])
def test_a_value_no_float32_can_hold_is_found_by_the_read(
    tmp_path: Path, way: str, dtype: str
) -> None:
    """Loaded without the value check (gpulab run on Vulkan), the run finds it (a float32
    file on the device that read it, another type on the host as it is cast): one problem
    naming the input, the file and the element, as validation words it."""
    array = np.ones(N, dtype=dtype)
    array[5 * CHUNK // 4 + 7] = np.inf if dtype == "<f4" else 1e300
    path = vector_graph(tmp_path, array)
    found = "inf" if dtype == "<f4" else "1e+300"
    with pytest.raises(GraphInvalid) as raised:
        run_vulkan(path)
    assert [str(p) for p in raised.value.errors] == [
        f"inputs.x.file: x.npy: element [{5 * CHUNK // 4 + 7}] is {found}; values must be "
        "finite and fit float32 (at most 3.4028235e+38 in size)"
    ]


@needs_vulkan
def test_a_file_a_cpu_node_also_reads_is_uploaded_as_any_value(tmp_path: Path, way: str) -> None:
    """Made once on the host, it comes to the Vulkan executor as a value: its buffer is plain
    device memory (under "rebar", not mapped), uploaded through the stager, not streamed."""
    if way != "rebar":
        pytest.skip("only the ReBAR-like device tells device_mapped from device memory")
    array = np.random.default_rng(5).standard_normal(N).astype("<f4")
    np.save(tmp_path / "x.npy", array)
    graph = {
        "version": 1,
        "inputs": {"x": {"type": "vector", "file": "x.npy"}},
        "nodes": [
            {"id": "s", "op": "scale", "inputs": {"x": "x", "a": 1.0}},
            {"id": "c", "op": "sum", "inputs": {"x": "x"}, "backend": "cpu"},
        ],
        "outputs": ["s", "c"],
    }
    result, counts = run_vulkan(write_graph(tmp_path, graph))
    same_bits(result.outputs["s"], array)
    assert result.inputs["x"] == {"source": "file", "made_on": "host"}
    assert (counts["staged"], counts["direct"], counts["file"], counts["file_direct"]) == (
        1,
        0,
        0,
        0,
    )


def two_file_graph(folder: Path, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> Path:
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    graph = {
        "version": 1,
        "inputs": {
            "x": {"type": "vector", "file": "x.npy"},
            "y": {"type": "vector", "file": "y.npy"},
        },
        "nodes": [{"id": "s", "op": "add", "inputs": {"x": "x", "y": "y"}}],
        "outputs": ["s"],
    }
    return write_graph(folder, graph)


@needs_vulkan
@pytest.mark.parametrize("name", ["x", "y"])
def test_a_file_cut_short_after_the_load_is_an_input_error(
    tmp_path: Path, way: str, name: str
) -> None:
    """x: the graph's one file; y: the second of two streamed together, the one named."""
    ones = np.ones(N, dtype=np.float32)
    path = vector_graph(tmp_path, ones) if name == "x" else two_file_graph(tmp_path, ones, ones)
    graph = load_graph(path, check_values=False)
    data = tmp_path / f"{name}.npy"
    data.write_bytes(data.read_bytes()[: 3 * CHUNK])
    with Runner("vulkan") as runner, pytest.raises(GraphInvalid) as raised:
        runner.run(graph)
    (problem,) = raised.value.errors
    assert str(problem).startswith(
        f"inputs.{name}.file: {name}.npy: cannot be read (the file ends at byte"
    )


@needs_vulkan
def test_two_files_stream_together(tmp_path: Path, way: str) -> None:
    rng = np.random.default_rng(9)
    x, y = (rng.standard_normal(N).astype("<f4") for _ in range(2))
    result, counts = run_vulkan(two_file_graph(tmp_path, x, y))
    same_bits(result.outputs["s"], x + y)
    assert counts[streamed_path(way)] == 2


@needs_vulkan
@pytest.mark.parametrize("backend", ["vulkan", "cpu"])
def test_gpulab_run_refuses_a_bad_value_in_one_line(tmp_path: Path, backend: str) -> None:
    array = np.ones(3000, dtype=np.float32)
    array[2999] = np.nan
    path = vector_graph(tmp_path, array)
    done = subprocess_cli("run", str(path), "--backend", backend)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"gpulab: {path}: inputs.x.file: x.npy: element [2999] is nan; values must be finite "
        "and fit float32 (at most 3.4028235e+38 in size)"
    ]


@needs_vulkan
def test_gpulab_run_refuses_a_truncated_file_in_one_line(tmp_path: Path) -> None:
    path = vector_graph(tmp_path, np.ones(3000, dtype=np.float32))
    data = tmp_path / "x.npy"
    data.write_bytes(data.read_bytes()[:5000])
    done = subprocess_cli("run", str(path), "--backend", "vulkan")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"gpulab: {path}: inputs.x.file: x.npy: not a readable .npy array")


@needs_vulkan
def test_full_results_written_to_a_file_equal_numpy(tmp_path: Path) -> None:
    """A streamed input, read back with --full into the result file: numpy's values."""
    array = np.random.default_rng(9).standard_normal(70_001).astype(np.float32)
    path = vector_graph(tmp_path, array)
    output = tmp_path / "result.json"
    done = subprocess_cli("run", str(path), "--backend", "vulkan", "--full", "-o", str(output))
    assert done.returncode == 0, done.stderr
    result = json.loads(output.read_text())
    assert result["inputs"]["x"]["read"] == "streamed"
    same_bits(np.asarray(result["outputs"]["s"]["data"], dtype=np.float32), array)


@pytest.mark.parametrize("threads", [1, 3])
def test_validation_checks_large_files_on_threads_and_reports_the_first_bad_element(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    monkeypatch.setattr(gpulab.graph.npy, "CHECK_CHUNK", 1000)
    monkeypatch.setattr(gpulab.graph.npy, "CHECK_THREADS_FROM", 2000)
    array = np.ones((30, 1001), dtype=np.float32)
    array[29, 1000] = np.inf
    array[12, 3] = np.nan  # element 12015: the first, in the 13th chunk
    np.save(tmp_path / "a.npy", array)
    assert gpulab.graph.npy.first_bad_value(
        np.load(tmp_path / "a.npy", mmap_mode="r"), threads
    ) == (
        "element [12, 3] is nan; values must be finite and fit float32 (at most 3.4028235e+38 "
        "in size)"
    )


def _lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return done.stderr.splitlines()


def files_graph(
    folder: Path,
    files: dict[str, np.ndarray[Any, Any]],
    nodes: list[dict[str, Any]],
    outputs: list[str],
) -> dict[str, Any]:
    """A graph whose inputs are vectors from NAME.npy files, saved in `folder`."""
    for name, values in files.items():
        np.save(folder / f"{name}.npy", values)
    inputs = {name: {"type": "vector", "file": f"{name}.npy"} for name in files}
    return {"version": 1, "inputs": inputs, "nodes": nodes, "outputs": outputs}


def validate_and_run(
    path: Path,
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """`gpulab validate` and `gpulab run --backend vulkan` on `path`: both refuse it."""
    validated = subprocess_cli("validate", str(path))
    ran = subprocess_cli("run", str(path), "--backend", "vulkan")
    assert (validated.returncode, ran.returncode) == (2, 2), ran.stderr
    return validated, ran


@needs_vulkan
def test_gpulab_run_on_vulkan_checks_values_on_the_device_not_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No pass over the file before the run: the device that reads it finds its NaN, and the
    refusal is validate's, line for line; a good file runs with no host check at all."""
    checks: list[int] = []
    first_bad_value = gpulab.graph.npy.first_bad_value
    monkeypatch.setattr(
        gpulab.graph.npy,
        "first_bad_value",
        lambda array, threads=None: checks.append(array.size) or first_bad_value(array, threads),
    )
    array = np.ones(N, dtype=np.float32)
    path = vector_graph(tmp_path, array)
    code, _, err = cli(capsys, "run", str(path), "--backend", "vulkan", "-o", "-")
    assert (code, err, checks) == (0, "", [])
    array[N - 7] = -np.inf
    array[N - 3] = np.nan
    path = vector_graph(tmp_path, array)
    assert cli(capsys, "run", str(path), "--backend", "vulkan")[::2] == (
        2,
        f"gpulab: {path}: inputs.x.file: x.npy: element [{N - 7}] is -inf; values must be "
        "finite and fit float32 (at most 3.4028235e+38 in size)\n",
    )
    assert checks == [N]  # found on the device; the host looked once, for validate's lines
    validated = cli(capsys, "validate", str(path))
    assert validated[::2] == cli(capsys, "run", str(path), "--backend", "vulkan")[::2]


@needs_vulkan
def test_an_unused_file_with_a_bad_value_is_refused_by_the_run_too(tmp_path: Path) -> None:
    bad = np.ones(100, dtype=np.float32)
    bad[40] = np.inf
    files = {"x": np.ones(100, dtype=np.float32), "spare": bad}
    nodes = [{"id": "s", "op": "scale", "inputs": {"x": "x", "a": 2.0}}]
    path = write_graph(tmp_path, files_graph(tmp_path, files, nodes, ["s"]))
    validated, ran = validate_and_run(path)
    assert _lines(validated) == [
        f"gpulab: {path}: inputs.spare.file: spare.npy: element [40] is inf; values must be "
        "finite and fit float32 (at most 3.4028235e+38 in size)"
    ]
    assert _lines(ran) == _lines(validated)


@needs_vulkan
def test_a_run_stopped_by_anything_else_still_refuses_what_validate_refuses(
    tmp_path: Path,
) -> None:
    """A cpu node's numerical failure (normalize of zeros: exit 4) before the device reads
    a file with a NaN: validate refuses the graph, so the run does, in its words; and a
    problem elsewhere in the graph comes with the file's, as validate lists them."""
    bad = np.ones(64, dtype=np.float32)
    bad[0] = np.nan
    files = {"z": np.zeros(64, dtype=np.float32), "x": bad}
    nodes = [
        {"id": "u", "op": "normalize", "inputs": {"x": "z"}, "backend": "cpu"},
        {"id": "s", "op": "add", "inputs": {"x": "u", "y": "x"}},
    ]
    for outputs, problems in ((["s"], 1), (["s", "nowhere"], 2)):
        path = write_graph(tmp_path, files_graph(tmp_path, files, nodes, outputs))
        validated, ran = validate_and_run(path)
        assert len(_lines(validated)) == problems, validated.stderr
        assert _lines(ran) == _lines(validated)
