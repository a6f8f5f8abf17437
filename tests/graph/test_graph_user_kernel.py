"""A user's own compute shader as a graph node (`"op": "kernel"`, docs/cli.md): compiled (or
read as .spv) and checked against the binding convention when the graph is validated, run on
Vulkan (lavapipe), on cpu and native only through the numpy reference the node names."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab import Runner, load_graph
from gpulab.graph.schema import graph_schema
from gpulab.ops import user_kernel
from gpulab.ops.spirv import SpirvError, reflect
from gpulab.submit import LocalTransport, prepare
from gpulab.submit.staging import upload
from graph_helpers import cli, needs_vulkan, write_graph

needs_glslc = pytest.mark.skipif(shutil.which("glslc") is None, reason="glslc is not installed")
pytestmark = needs_glslc

LEAKY_RELU = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { float alpha; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < o.length()) o[i] = x[i] > 0.0 ? x[i] : p.alpha * x[i];
}
"""

REFERENCE = """import numpy as np
def leaky_relu(x, alpha):
    return np.where(x > 0, x, np.float32(alpha) * x).astype(np.float32)
"""

N = 1000


def _x() -> Any:
    return np.random.default_rng(3).uniform(-1.0, 1.0, N).astype(np.float32)


def _graph(**node: Any) -> dict[str, Any]:
    kernel_node: dict[str, Any] = {
        "id": "r",
        "op": "kernel",
        "kernel": {"file": "leaky_relu.comp"},
        "inputs": {"x": "x", "alpha": 0.1},
        "output": {"like": "x"},
    }
    kernel_node.update(node)
    return {
        "version": 1,
        "name": "user-kernel",
        "inputs": {"x": {"type": "vector", "random": {"n": N, "seed": 3, "low": -1, "high": 1}}},
        "nodes": [kernel_node, {"id": "s", "op": "sum", "inputs": {"x": "r"}}],
        "outputs": ["r", "s"],
    }


@pytest.fixture(autouse=True)
def spirv_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test compiles into a cache of its own."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    (graphs / "leaky_relu.comp").write_text(LEAKY_RELU, encoding="utf-8")
    (graphs / "kernel_refs.py").write_text(REFERENCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(graphs))
    return graphs


def _run(capsys: pytest.CaptureFixture[str], path: Path, backend: str) -> tuple[int, Any, str]:
    code, out, err = cli(capsys, "run", str(path), "--backend", backend)
    return code, json.loads(out) if code == 0 else None, err


def _expected() -> Any:
    x = _x()
    return np.where(x > 0, x, np.float32(0.1) * x)


@needs_vulkan
def test_glsl_kernel_runs_on_vulkan(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, result, err = _run(capsys, write_graph(folder, _graph()), "vulkan")
    assert code == 0, err
    got = np.asarray(result["outputs"]["r"]["data"], dtype=np.float32)
    np.testing.assert_array_equal(got, _expected())
    assert result["outputs"]["s"]["value"] == pytest.approx(float(_expected().sum()), rel=1e-5)
    assert [node["backend"] for node in result["nodes"]] == ["vulkan", "vulkan"]


@needs_vulkan
def test_auto_runs_a_kernel_on_vulkan(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, result, err = _run(capsys, write_graph(folder, _graph()), "auto")
    assert code == 0, err
    assert result["backend"] == "vulkan"


@needs_vulkan
def test_a_ready_spv_and_a_declared_shape(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spirv = user_kernel.compile_glsl(folder / "leaky_relu.comp", "leaky_relu.comp")
    (folder / "leaky_relu.spv").write_bytes(spirv)
    graph = _graph(kernel={"file": "leaky_relu.spv"}, output={"shape": [N]})
    code, result, err = _run(capsys, write_graph(folder, graph), "vulkan")
    assert code == 0, err
    got = np.asarray(result["outputs"]["r"]["data"], dtype=np.float32)
    np.testing.assert_array_equal(got, _expected())


def test_compiled_spirv_is_cached_by_content(
    folder: Path, spirv_cache: Path, compiler_calls: list[list[str]]
) -> None:
    calls = compiler_calls
    first = user_kernel.compile_glsl(folder / "leaky_relu.comp", "leaky_relu.comp")
    second = user_kernel.compile_glsl(folder / "leaky_relu.comp", "leaky_relu.comp")
    assert first == second and len(calls) == 1
    assert len(list((spirv_cache / "gpulab" / "spirv").glob("*.spv"))) == 1
    (folder / "leaky_relu.comp").write_text(LEAKY_RELU + "\n", encoding="utf-8")
    user_kernel.compile_glsl(folder / "leaky_relu.comp", "leaky_relu.comp")
    assert len(calls) == 2  # another source, another entry


def test_sources_compile_ahead_in_one_process_and_a_bad_one_is_left_to_compile_source(
    spirv_cache: Path, compiler_calls: list[list[str]]
) -> None:
    calls = compiler_calls
    good = [LEAKY_RELU.encode(), LEAKY_RELU.replace("p.alpha", "0.5 * p.alpha").encode()]
    bad = b"#version 450\nlayout(local_size_x = 64) in;\nvoid main() { nonsense; }\n"
    compiled = user_kernel.compile_ahead([*good, bad, good[0]])
    assert len(calls) == 1 and sorted(compiled) == sorted(good)
    assert [user_kernel.cached_spirv(source) for source in good] == [compiled[s] for s in good]
    assert user_kernel.cached_spirv(bad) is None
    assert user_kernel.compile_source(good[1], "b.comp") == compiled[good[1]]
    with pytest.raises(user_kernel.KernelError, match=r"^kernel bad.comp:3: error: "):
        user_kernel.compile_source(bad, "bad.comp")
    calls.clear()
    assert user_kernel.compile_ahead(good) == {}  # cached: nothing to do
    assert calls == []


def test_compiling_ahead_needs_glslc(
    spirv_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # glslangValidator takes one shader at a time (its -o names one output): nothing ahead.
    glslang = shutil.which("glslangValidator")
    if glslang is None:
        pytest.skip("glslangValidator is not installed")
    only = tmp_path / "bin"
    only.mkdir()
    (only / "glslangValidator").symlink_to(glslang)
    monkeypatch.setenv("PATH", str(only))
    assert not user_kernel.compiles_many()
    sources = [LEAKY_RELU.encode(), LEAKY_RELU.replace("0.0", "-0.0").encode()]
    assert user_kernel.compile_ahead(sources) == {}
    assert user_kernel.cached_spirv(sources[0]) is None


def test_reflection_reads_local_size_bindings_and_push_constants(folder: Path) -> None:
    spirv = user_kernel.compile_glsl(folder / "leaky_relu.comp", "leaky_relu.comp")
    found = reflect(spirv)
    assert found.local_size == (64, 1, 1)
    assert [(b.set, b.binding, b.storage) for b in found.bindings] == [(0, 0, True), (0, 1, True)]
    assert found.push_constant_bytes == 4
    with pytest.raises(SpirvError):
        reflect(b"\0" * 24)


@pytest.mark.parametrize("backend", ["cpu", "native"])
def test_host_backends_need_a_reference(
    folder: Path, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, write_graph(folder, _graph()), backend)
    assert code == 3
    assert err.count("\n") == 1 and "'r'" in err and "reference" in err
    graph = _graph(kernel={"file": "leaky_relu.comp", "reference": "kernel_refs:leaky_relu"})
    code, result, err = _run(capsys, write_graph(folder, graph), backend)
    assert code == 0, err
    got = np.asarray(result["outputs"]["r"]["data"], dtype=np.float32)
    np.testing.assert_array_equal(got, _expected())


BAD_SOURCE = "#version 450\nlayout(local_size_x = 64) in;\nvoid main() {\n    foo;\n}\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kernel": {"file": "missing.comp"}}, "kernel file missing.comp not found"),
        ({"kernel": {"file": "bad.comp"}}, "kernel bad.comp:4: error: 'foo' : undeclared"),
        ({"inputs": {"x": "x", "y": "x", "alpha": 0.1}}, "declares bindings [0, 1] but the node"),
        ({"inputs": {"x": "x", "alpha": 0.1, "b": 2.0}}, "push-constant block has 4 bytes"),
        ({"output": {"like": "q"}}, "output.like must name one of the node's inputs"),
        ({"output": {"shape": [-1]}}, "output.shape must be"),
        ({"kernel": {"file": "leaky_relu.comp", "fast": True}}, "kernel.fast: unknown key"),
        ({"kernel": {"file": "not_spirv.spv"}}, "not_spirv.spv: not SPIR-V"),
    ],
)
def test_kernel_problems_are_exit_2_naming_the_node(
    folder: Path,
    change: dict[str, Any],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (folder / "bad.comp").write_text(BAD_SOURCE, encoding="utf-8")
    (folder / "not_spirv.spv").write_bytes(b"hello, world")
    code, _, err = cli(capsys, "validate", str(write_graph(folder, _graph(**change))))
    assert code == 2
    assert err.count("\n") == 1, err
    assert "nodes[0] (node 'r'): " in err and message in err


def test_a_kernel_output_is_checked_downstream(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(
        capsys, "validate", str(write_graph(folder, _graph(output={"shape": [4, 4]})))
    )
    assert code == 2 and "sum's x must be a vector, but 'r' is a matrix" in err


def test_no_compiler_is_exit_2(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(user_kernel, "compiler", lambda: None)
    code, _, err = cli(capsys, "validate", str(write_graph(folder, _graph())))
    assert code == 2 and "no glslc or glslangValidator" in err


def test_import_gpulab_does_not_load_the_kernel_module() -> None:
    code = "import sys, gpulab; print('gpulab.ops.user_kernel' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"


def test_the_schema_takes_kernel_nodes_and_only_on_kernel_ops() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = graph_schema()
    jsonschema.validate(_graph(), schema)
    for bad in (
        _graph(output={"size": 3}),
        _graph(kernel={"file": "k.glsl"}),
        _graph(op="scale", inputs={"x": "x", "a": 2.0}),  # kernel keys on another op
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


@needs_vulkan
def test_submit_stages_the_shader_with_the_graph(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shaders = folder / "shaders"
    shaders.mkdir()
    (folder / "leaky_relu.comp").rename(shaders / "leaky_relu.comp")
    graph = _graph(kernel={"file": "shaders/leaky_relu.comp"})
    staged = prepare(write_graph(folder, graph))
    assert staged.document["nodes"][0]["kernel"] == {"file": "kernel-0-leaky_relu.comp"}
    assert staged.files == (("kernel-0-leaky_relu.comp", shaders / "leaky_relu.comp"),)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    path = upload(LocalTransport(), staged, str(job_dir))
    code, result, err = _run(capsys, Path(path), "vulkan")
    assert code == 0, err
    np.testing.assert_array_equal(result["outputs"]["r"]["data"], _expected())


ADD_TWICE = """#version 450
layout(local_size_x = 16) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < o.length()) o[i] = a[i] + 2.0 * b[i];
}
"""


@needs_vulkan
def test_matrices_and_no_push_constants(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "add_twice.comp").write_text(ADD_TWICE, encoding="utf-8")
    graph = {
        "version": 1,
        "inputs": {
            "A": {"type": "matrix", "random": {"rows": 7, "cols": 5, "seed": 1}},
            "B": {"type": "matrix", "random": {"rows": 7, "cols": 5, "seed": 2}},
        },
        "nodes": [
            {
                "id": "m",
                "op": "kernel",
                "kernel": {"file": "add_twice.comp"},
                "inputs": {"a": "A", "b": "B"},
                "output": {"shape": [7, 5]},
            }
        ],
        "outputs": ["m"],
    }
    code, result, err = _run(capsys, write_graph(folder, graph), "vulkan")
    assert code == 0, err
    a = np.random.default_rng(1).uniform(0, 1, (7, 5)).astype(np.float32)
    b = np.random.default_rng(2).uniform(0, 1, (7, 5)).astype(np.float32)
    assert result["outputs"]["m"]["shape"] == [7, 5]
    np.testing.assert_array_equal(np.asarray(result["outputs"]["m"]["data"], np.float32), a + 2 * b)


@needs_vulkan
def test_another_shader_of_the_same_name_is_another_recording(folder: Path) -> None:
    other = folder / "other"
    other.mkdir()
    (other / "leaky_relu.comp").write_text(LEAKY_RELU.replace("p.alpha * x[i]", "0.0"), "utf-8")
    graphs = [load_graph(write_graph(where, _graph())) for where in (folder, other)]
    with Runner("vulkan") as runner:
        first, second = (runner.run(graph).outputs["r"] for graph in graphs)
    np.testing.assert_array_equal(first, _expected())
    np.testing.assert_array_equal(second, np.maximum(_x(), 0))
