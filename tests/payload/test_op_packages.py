"""Ops from other packages: a package installed in a fresh venv adds an op through the
`gpulab.ops` entry point group, and the schema, `validate`, `run` on cpu and Vulkan,
selftest and bench know it; a graph of built-in ops never loads the entry points."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import gpulab
import pytest

SOURCE = Path(gpulab.__file__).resolve().parents[1]
TOY = '''
"""negate: -x, an op from outside gpulab."""

import numpy as np

from gpulab.ops.entry import Bench, OpEntry
from gpulab.ops.spec import Kind, OpSpec


def negate(x):
    return -np.asarray(x, dtype=np.float32)


def record(recording, array, inputs, out, params):
    recording.elementwise(array("x"), None, -1.0, out, divide=False)
    return {}


ENTRY = OpEntry(
    spec=OpSpec("negate", (("x", Kind.VECTOR),), Kind.VECTOR, lambda s: s["x"], description="-x"),
    reference="toy_ops:negate",
    vulkan="toy_ops:record",
    tolerance=lambda b, inputs, ref, params: b.np.zeros(ref.shape),
    float32=lambda np, x: -x,
    cases=lambda d: [({"x": d.x}, {})],
    bench=Bench(
        bytes_moved=lambda n, dims: 8 * n,
        flops=lambda n, dims: n,
        inputs=lambda n, dims: {"x": ((n,), 0.5)},
    ),
)
'''
GRAPH = {
    "version": 1,
    "name": "toy",
    "inputs": {"x": {"type": "vector", "data": [1.0, -2.0, 3.5]}},
    "nodes": [
        {"id": "m", "op": "negate", "inputs": {"x": "x"}},
        {"id": "s", "op": "sum", "inputs": {"x": "m"}},
    ],
    "outputs": ["m", "s"],
}


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees gpulab and its dependencies, with the toy package installed the way
    pip installs one: its module and a .dist-info naming its entry point."""
    root = tmp_path_factory.mktemp("toy-venv")
    venv.create(root, with_pip=False)
    done = subprocess.run(
        [root / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    site = Path(done.stdout.strip())
    here = sysconfig.get_path("purelib")
    (site / "gpulab-here.pth").write_text(f"{SOURCE}\n{here}\n")
    (site / "toy_ops.py").write_text(TOY)
    info = site / "toy_ops-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-ops\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gpulab.ops]\nnegate = toy_ops:ENTRY\n")
    return root / "bin" / "python"


def gpulab_in(python: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-m", "gpulab", *argv], capture_output=True, text=True, check=False, timeout=300
    )


def test_the_schema_and_validate_know_the_op(python: Path, tmp_path: Path) -> None:
    schema = json.loads(gpulab_in(python, "schema").stdout)
    assert "negate" in json.dumps(schema)
    graph = tmp_path / "toy.json"
    graph.write_text(json.dumps(GRAPH))
    done = gpulab_in(python, "validate", str(graph))
    assert (done.returncode, done.stdout.strip()) == (0, "ok")
    wrong = dict(GRAPH, nodes=[{"id": "m", "op": "negat", "inputs": {"x": "x"}}], outputs=["m"])
    graph.write_text(json.dumps(wrong))
    done = gpulab_in(python, "validate", str(graph))
    assert done.returncode == 2
    assert "jacobi, negate)" in done.stderr


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_a_graph_runs_the_op(python: Path, tmp_path: Path, backend: str) -> None:
    graph = tmp_path / "toy.json"
    graph.write_text(json.dumps(GRAPH))
    done = gpulab_in(python, "run", str(graph), "--backend", backend)
    assert done.returncode == 0, done.stderr
    outputs = json.loads(done.stdout)["outputs"]
    assert outputs["m"]["data"] == [-1.0, 2.0, -3.5]
    assert outputs["s"]["value"] == -2.5


def test_the_native_backend_says_it_cannot_run_the_op(python: Path, tmp_path: Path) -> None:
    graph = tmp_path / "toy.json"
    graph.write_text(json.dumps(GRAPH))
    done = gpulab_in(python, "run", str(graph), "--backend", "native")
    assert done.returncode in (3, 4)
    assert "Traceback" not in done.stderr


def test_selftest_checks_the_op(python: Path) -> None:
    done = gpulab_in(python, "selftest", "--backend", "cpu", "--json")
    result = json.loads(done.stdout)
    negate = [check for check in result["checks"] if check["op"] == "negate"]
    assert result["ok"] and len(negate) == 7


def test_bench_measures_the_op(python: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = gpulab_in(
        python, "bench", "--ops", "negate", "--sizes", "1024", "--no-overhead", "--json", str(out)
    )
    assert done.returncode == 0, done.stderr
    negate = [row for row in json.loads(out.read_text()) if row["op"] == "negate"]
    assert [(row["n"], row["bytes"]) for row in negate] == [(1024, 8 * 1024)]


def test_built_in_ops_load_no_entry_points(python: Path, tmp_path: Path) -> None:
    probe = (
        "import sys; from gpulab.cli.main import main; code = main(sys.argv[1:]); "
        "print('toy_ops' in sys.modules, 'importlib.metadata' in sys.modules)"
    )
    example = SOURCE.parent / "examples" / "saxpy_norm.json"
    done = subprocess.run(
        [python, "-c", probe, "validate", str(example)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split()[-2:] == ["False", "False"]


def test_the_toy_is_not_in_this_interpreter() -> None:
    assert "toy_ops" not in sys.modules
