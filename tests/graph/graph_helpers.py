"""Helpers for the graph tests: graphs written to files, and the CLI run in-process or as a
subprocess (the way users run it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from gpulab.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "payload" / "examples"
SCRIPT = Path(sys.executable).with_name("gpulab")
GPULAB = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "gpulab"]


def write_graph(folder: Path, graph: Any, name: str = "graph.json") -> Path:
    """`graph` as a file (a str is written as is, for malformed JSON)."""
    path = folder / name
    path.write_text(graph if isinstance(graph, str) else json.dumps(graph), encoding="utf-8")
    return path


def vector_graph(folder: Path, array: npt.NDArray[Any], a: float = 1.0) -> Path:
    """s = a x on x from x.npy, as graph.json (a = 1: the output is x as the device got it)."""
    np.save(folder / "x.npy", array)
    graph = {
        "version": 1,
        "inputs": {"x": {"type": "vector", "file": "x.npy"}},
        "nodes": [{"id": "s", "op": "scale", "inputs": {"x": "x", "a": a}}],
        "outputs": ["s"],
    }
    return write_graph(folder, graph)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`gpulab ARGS` in this process: exit code, stdout, stderr."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def subprocess_cli(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`gpulab ARGS` as a separate process."""
    return subprocess.run(
        [*GPULAB, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def small_graph(**overrides: Any) -> dict[str, Any]:
    """A valid graph to break one piece at a time."""
    graph: dict[str, Any] = {
        "version": 1,
        "name": "small",
        "inputs": {
            "x": {"type": "vector", "data": [1.0, 2.0, 3.0]},
            "y": {"type": "vector", "fill": {"n": 3, "value": 0.5}},
            "a": {"type": "scalar", "value": 2.0},
        },
        "nodes": [
            {"id": "s", "op": "saxpy", "inputs": {"a": "a", "x": "x", "y": "y"}},
            {"id": "n", "op": "l2_norm", "inputs": {"x": "s"}},
        ],
        "outputs": ["s", "n"],
    }
    graph.update(overrides)
    return graph


def has_vulkan() -> bool:
    """A Vulkan device exists here (lavapipe in CI)."""
    from gpulab.backends.select import vulkan_devices  # noqa: PLC0415

    return bool(vulkan_devices())


needs_vulkan = pytest.mark.skipif(not has_vulkan(), reason="no Vulkan device")
