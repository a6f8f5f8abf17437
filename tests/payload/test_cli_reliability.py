"""The payload CLI under faults an admin meets: a missing device, a full disk, a wrong path."""

from __future__ import annotations

import io
import json
import resource
import signal
import subprocess
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab.graph import MemoryLimit
from gpulab.results import Result, result_file
from gpulab.results.result import DATA_LIMIT
from gpulab.results.result_file import PYTHON_NUMBER_BYTES
from gpulab.running import Runner, runner

from tests.graph.graph_helpers import GPULAB, cli, small_graph, write_graph


def test_a_device_that_does_not_exist_is_exit_3_under_auto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: auto quietly ran on cpu with exit 0, though the contract says 3.
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--device", "99")
    assert (code, out) == (3, "")
    assert err.startswith("gpulab: --device 99: there is no such Vulkan device here (found: 0: ")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("values", "found"),
    [
        (np.array([1.0, np.nan], dtype=np.float32), "element [1] is nan"),
        (np.array([[1.0, 2.0], [np.inf, 0.0]], dtype=np.float32), "element [1, 0] is inf"),
        (np.array([1.0, 1e300]), "element [1] is 1e+300"),
    ],
)
def test_npy_values_that_are_no_finite_float32_are_refused_by_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], values: Any, found: str
) -> None:
    # Was: accepted; the run turned them into nulls or garbage with exit 0.
    np.save(tmp_path / "v.npy", values)
    kind = "vector" if values.ndim == 1 else "matrix"
    document = {
        "version": 1,
        "inputs": {"v": {"type": kind, "file": "v.npy"}},
        "nodes": [{"id": "s", "op": "scale", "inputs": {"x": "v", "a": 2.0}}],
        "outputs": ["s"],
    }
    if kind == "matrix":
        document["nodes"] = [{"id": "s", "op": "matmul", "inputs": {"A": "v", "B": "v"}}]
    path = write_graph(tmp_path, document)
    code, out, err = cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"gpulab: {path}: inputs.v.file: v.npy: {found}; values must be finite")
    assert len(err.splitlines()) == 1


def test_finite_npy_values_of_other_types_are_cast_to_float32(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "v.npy", np.array([1, 2, 3], dtype=np.int64))
    document = {
        "version": 1,
        "inputs": {"v": {"type": "vector", "file": "v.npy"}},
        "nodes": [{"id": "s", "op": "sum", "inputs": {"x": "v"}}],
        "outputs": ["s"],
    }
    code, out, err = cli(capsys, "run", str(write_graph(tmp_path, document)), "--backend", "cpu")
    assert code == 0, err
    assert json.loads(out)["outputs"]["s"]["value"] == 6.0


def test_random_low_above_high_fails_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: accepted by validate, then failed only when run.
    document = small_graph()
    document["inputs"]["x"] = {"type": "vector", "random": {"n": 3, "low": 2.0, "high": 1.0}}
    path = write_graph(tmp_path, document)
    code, out, err = cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err == f"gpulab: {path}: inputs.x.random.high: must be at least low (2), got 1\n"


@pytest.mark.parametrize("backend", ["cpu", "native", "vulkan"])
def test_a_diverging_jacobi_is_exit_4_naming_the_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    # Was: nulls in the result with exit 0 (a zero-vector normalize was already exit 4).
    document = {
        "version": 1,
        "inputs": {
            "A": {"type": "matrix", "data": [[1.0, 1e30], [1e30, 1.0]]},
            "b": {"type": "vector", "data": [1.0, 1.0]},
        },
        "nodes": [
            {
                "id": "j",
                "op": "jacobi",
                "inputs": {"A": "A", "b": "b"},
                "params": {"iterations": 50},
            }
        ],
        "outputs": ["j"],
    }
    path = write_graph(tmp_path, document)
    code, out, err = cli(capsys, "run", str(path), "--backend", backend)
    assert (code, out) == (4, "")
    assert err.startswith("gpulab: numerical failure: node 'j' (jacobi): ")
    assert len(err.splitlines()) == 1


def saved_result(folder: Path) -> Path:
    path = folder / "out.json"
    path.write_text('{"a good": "earlier result"}\n', encoding="utf-8")
    return path


def test_a_failed_write_keeps_the_previous_result_and_is_exit_4(tmp_path: Path) -> None:
    # Was: written in place, so a file size limit left a truncated JSON where a good one was.
    document = small_graph()
    document["inputs"]["x"] = {"type": "vector", "fill": {"n": 20_000, "value": 1.0}}
    document["inputs"]["y"] = {"type": "vector", "fill": {"n": 20_000, "value": 0.5}}
    path, out = write_graph(tmp_path, document), saved_result(tmp_path)

    def small_files() -> None:  # writes beyond 64 KiB fail with EFBIG, not SIGXFSZ
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))

    done = subprocess.run(
        [*GPULAB, "run", str(path), "--backend", "cpu", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=small_files,
    )
    assert (done.returncode, done.stdout) == (4, ""), done.stderr
    assert done.stderr == (
        f"gpulab: --output {out}: cannot write the result: File too large; "
        "the previous file is unchanged\n"
    )
    assert out.read_text(encoding="utf-8") == '{"a good": "earlier result"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.json", "out.json"]


def test_the_result_replaces_the_file_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = write_graph(tmp_path, small_graph()), saved_result(tmp_path)
    out.chmod(0o640)
    code, stdout, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(out))
    assert (code, stdout, err) == (0, "", "")
    assert json.loads(out.read_text(encoding="utf-8"))["outputs"]["n"]["type"] == "scalar"
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.json", "out.json"]


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("missing/out.json", "the folder {folder}/missing does not exist"),
        ("graph.json/out.json", "{folder}/graph.json is not a folder"),
        (".", "is a directory"),
        ("graph.json", "is the input {folder}/graph.json, which it would replace"),
        ("v.npy", "is the input {folder}/v.npy, which it would replace"),
    ],
)
def test_a_bad_output_is_exit_2_before_anything_runs(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    output: str,
    reason: str,
) -> None:
    # Was: checked after computing (2.9 s of work, then exit 2); the graph itself overwritten.
    np.save(tmp_path / "v.npy", np.ones(3, dtype=np.float32))
    document = small_graph()
    document["inputs"]["x"] = {"type": "vector", "file": "v.npy"}
    path = write_graph(tmp_path, document)
    before = path.read_bytes()

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the graph ran")

    monkeypatch.setattr(Runner, "run", no_work)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", output)
    assert (code, out) == (2, "")
    assert err == f"gpulab: --output {output}: {reason.format(folder=tmp_path)}\n"
    assert path.read_bytes() == before


def test_dash_is_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: a file named "-".
    monkeypatch.chdir(tmp_path)
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", "-")
    assert (code, err) == (0, "")
    assert json.loads(out)["graph"] == "small"
    assert not (tmp_path / "-").exists()


def test_a_full_result_too_large_for_memory_is_exit_4_naming_the_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: not counted; a --full result took 6x its file size in memory, then the OOM killer.
    monkeypatch.setattr(runner, "available_memory", lambda: MemoryLimit(16 << 20, "memory"))
    document = small_graph()
    document["inputs"]["x"] = {"type": "vector", "fill": {"n": 1 << 20, "value": 1.0}}
    document["inputs"]["y"] = {"type": "vector", "fill": {"n": 1 << 20, "value": 0.5}}
    path = write_graph(tmp_path, document)
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu", "--full")
    assert (code, out) == (4, "")
    assert err == (
        "gpulab: the result JSON (--full) needs about 32.0 MiB of memory to write besides "
        "the outputs' 4.0 MiB, only 16.0 MiB of memory exist\n"
    )
    code, out, err = cli(capsys, "run", str(path), "--backend", "cpu")  # summaries only
    assert code == 0, err


class CountingStream(io.TextIOBase):
    """A sink that keeps only the number of characters written."""

    def __init__(self) -> None:
        self.characters = 0

    def write(self, text: str) -> int:
        self.characters += len(text)
        return len(text)


def test_the_result_json_is_streamed_one_output_at_a_time() -> None:
    # Was: json.dumps of the whole document: 200 x 65536 elements took 2 GB to write 357 MB.
    outputs = {f"o{i}": np.full(DATA_LIMIT, i + 0.1, dtype=np.float32) for i in range(16)}
    result = Result("g", "cpu", "cpu", "", {}, outputs, [], 0.0)
    sink = CountingStream()
    tracemalloc.start()
    try:
        result.write_json(sink)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    one_output = DATA_LIMIT * PYTHON_NUMBER_BYTES
    assert sink.characters > 16 * DATA_LIMIT * 10
    assert peak < 3 * one_output  # a whole-document write holds 16 outputs and the text


def test_dev_stdout_redirected_to_a_file_is_stdout(tmp_path: Path) -> None:
    # A rename would have replaced the link /dev/stdout itself; it is this process's stdout.
    path, out = write_graph(tmp_path, small_graph()), tmp_path / "redirected.json"
    with out.open("w", encoding="utf-8") as stdout:
        done = subprocess.run(
            [*GPULAB, "run", str(path), "--backend", "cpu", "-o", "/dev/stdout"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(out.read_text(encoding="utf-8"))["graph"] == "small"
    assert Path("/dev/stdout").is_symlink()


def test_a_result_larger_than_the_free_disk_is_exit_4_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, out = write_graph(tmp_path, small_graph()), tmp_path / "out.json"

    monkeypatch.setattr(result_file, "_free_bytes", lambda folder: 100)

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the graph ran")

    monkeypatch.setattr(Runner, "run", no_work)
    code, stdout, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(out))
    assert (code, stdout) == (4, "")
    assert err.startswith(f"gpulab: --output {out}: the result JSON needs about ")
    # Sizes a reader can compare: a tiny result and 100 free bytes are not "0.0 MiB" each.
    assert err.endswith(f", only 100 bytes are free in {tmp_path}\n")
    assert "0.0 MiB" not in err
    assert not out.exists()
