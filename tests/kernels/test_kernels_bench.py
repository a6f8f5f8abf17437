"""`gpulab bench` on lavapipe: rows, JSON, the copy peak, flags (never timings' values)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest


def gpulab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulab", *args], capture_output=True, text=True, check=False
    )


def test_bench_writes_rows_with_the_contract_keys(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = gpulab(
        "bench", "--ops", "saxpy", "sum", "matvec", "--sizes", "1024", "4099", "--json", str(out)
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    measured = [r for r in rows if r["op"] != "dispatch_overhead"]
    assert {(r["op"], r["n"]) for r in measured} == {
        (op, n)
        for op in ("copy", "saxpy", "sum", "matvec")
        for n in (1024, 4100 if op == "copy" else 4099)
    }
    for row in measured:
        assert {"op", "n", "backend", "gbps", "time_ms", "pct_of_copy_peak"} <= row.keys()
        assert row["backend"] == "vulkan"
        assert row["gbps"] > 0 and row["time_ms"] > 0
    assert max(r["pct_of_copy_peak"] for r in measured if r["op"] == "copy") == pytest.approx(100)
    overhead = next(r for r in rows if r["op"] == "dispatch_overhead")
    assert overhead["gpu_us_per_dispatch"] > 0 and overhead["record_us_per_dispatch"] > 0
    assert overhead["record_rebind_us_per_dispatch"] > 0
    assert overhead["record_fresh_us_per_dispatch"] > 0
    assert "copy peak" in done.stdout
    assert "dispatch overhead" in done.stdout
    assert "[" in done.stderr  # the progress bar


def test_matmul_shapes_and_jacobi_sweeps(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = gpulab(
        "bench",
        *("--ops", "copy", "matmul", "jacobi", "--sizes", "32", "--shapes", "33x5x31"),
        *("--no-overhead", "--json", str(out)),
    )
    assert done.returncode == 0, done.stderr
    rows = {(r["op"], tuple(r["shape"])): r for r in json.loads(out.read_text()) if "shape" in r}
    assert set(rows) == {("matmul", (32, 32, 32)), ("matmul", (33, 5, 31)), ("jacobi", (32, 32))}
    odd = rows["matmul", (33, 5, 31)]
    assert odd["bytes"] == 4 * (33 * 5 + 5 * 31 + 33 * 31)
    assert odd["gflops"] == pytest.approx(2 * 33 * 5 * 31 / odd["time_ms"] / 1e6)
    jacobi = rows["jacobi", (32, 32)]
    assert jacobi["sweep_ms"] == pytest.approx(jacobi["time_ms"] / jacobi["sweeps"])
    assert jacobi["pct_of_copy_peak"] > 0
    assert "33x5x31" in done.stdout and "ms/sweep" in done.stdout


@pytest.mark.parametrize(
    "args",
    [["--sizes", "0"], ["--ops", "fft"], ["--compare", "numba"], ["--shapes", "4x4"]],
)
def test_bad_flags_exit_2(args: list[str]) -> None:
    done = gpulab("bench", *args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_a_size_beyond_the_device_exits_2_with_one_line() -> None:
    done = gpulab("bench", "--ops", "matmul", "--sizes", "4000000", "--no-overhead")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("gpulab: bench: matmul at size")


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None, reason="matplotlib here")
def test_plot_without_matplotlib_exits_3_before_measuring(tmp_path: Path) -> None:
    done = gpulab("bench", "--ops", "sum", "--sizes", "1024", "--plot", str(tmp_path / "p.png"))
    assert done.returncode == 3
    assert "matplotlib" in done.stderr
    assert done.stdout == ""


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch here")
def test_compare_without_torch_exits_3() -> None:
    done = gpulab("bench", "--ops", "sum", "--sizes", "1024", "--compare", "torch")
    assert done.returncode == 3
    assert "torch is not installed" in done.stderr
