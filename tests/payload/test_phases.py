"""Where a run's time goes: the result's `timing` phases and `gpulab run --profile`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpulab.backends.base import RUN_PHASES
from gpulab.results.result import TIMING_PHASES

from tests.payload.test_cli import gpulab

EXAMPLE = Path(__file__).resolve().parents[2] / "payload" / "examples" / "saxpy_norm.json"


@pytest.mark.parametrize("backend", ["cpu", "native", "vulkan"])
def test_timing_has_every_phase_and_the_run_phases_fit_in_the_total(backend: str) -> None:
    done = gpulab("run", str(EXAMPLE), "--backend", backend)
    assert done.returncode == 0, done.stderr
    timing = json.loads(done.stdout)["timing"]
    # Vulkan also counts the dispatches that ran (after fusion).
    counts = ["dispatches"] if backend == "vulkan" else []
    assert list(timing) == ["total_ms", *TIMING_PHASES, *counts]
    assert all(ms >= 0.0 for ms in timing.values()), timing
    assert sum(timing[key] for key in RUN_PHASES) <= timing["total_ms"]
    assert timing["load_ms"] > 0.0
    assert timing["inputs_ms"] > 0.0  # x and y are random inputs made for the run
    assert timing["write_ms"] > 0.0


def test_the_vulkan_executor_times_open_upload_record_gpu_and_readback(tmp_path: Path) -> None:
    # A `data` input is always made on the host, so the run has an upload to time.
    graph = {
        "version": 1,
        "inputs": {"x": {"type": "vector", "data": [1.0, 2.0, 3.0, 4.0]}},
        "nodes": [
            {"id": "y", "op": "scale", "inputs": {"x": "x", "a": 2.0}},
            {"id": "t", "op": "sum", "inputs": {"x": "y"}},
        ],
        "outputs": ["y", "t"],
    }
    (tmp_path / "graph.json").write_text(json.dumps(graph))
    done = gpulab("run", str(tmp_path / "graph.json"), "--backend", "vulkan")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["outputs"]["t"]["value"] == 20.0
    for key in ("open_ms", "upload_ms", "record_ms", "gpu_ms", "readback_ms"):
        assert result["timing"][key] > 0.0, key


def test_profile_prints_the_phases_on_stderr_and_keeps_stdout_the_result() -> None:
    done = gpulab("run", str(EXAMPLE), "--backend", "vulkan", "--profile")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    rows = dict(line.rsplit(None, 1) for line in done.stderr.splitlines()[1:])
    names = [key.removesuffix("_ms") for key in TIMING_PHASES]
    assert list(rows) == [*names, "run total", "run, in no phase"]
    assert float(rows["run total"]) == pytest.approx(result["timing"]["total_ms"], abs=1e-3)
    assert float(rows["gpu"]) == pytest.approx(result["timing"]["gpu_ms"], abs=1e-3)
