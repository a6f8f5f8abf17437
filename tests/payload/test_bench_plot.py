"""The benchmark charts, drawn from the H200 runs saved in docs/benchmarks/: the ratio to the
reference where a run had one, GB/s otherwise, the memory sweep; one colour per op, every y axis
from zero. `gpulab bench --from RESULT.json --plot OUT.png` redraws them without a device. The
drawing tests are skipped where matplotlib (the plot extra) is not installed."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from gpulab.diagnostics.bench_ops import ALL_OPS
from gpulab.diagnostics.bench_plot import PALETTE, kind_of, load_rows, memory_series, op_colors

from tests.payload.test_cli import PYTHONPATH, gpulab, no_driver_env
from tests.payload.test_plot_extra import without_matplotlib

SAVED = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
VECTOR = SAVED / "kernels-h200-vector-final.json"
MATRIX = SAVED / "kernels-h200-matrix.json"
MEMORY = SAVED / "memory-h200-sweep.json"
needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="matplotlib (gpulab[plot]) is absent"
)


def rows_of(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(path.read_text())
    return rows


def without_reference(path: Path) -> list[dict[str, Any]]:
    """A run's Vulkan rows as a run without --compare writes them."""
    return [
        {key: value for key, value in row.items() if not key.startswith("vs_")}
        for row in rows_of(path)
        if row["backend"] == "vulkan"
    ]


def rgb(color: str) -> tuple[float, ...]:
    return tuple(int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))


def test_every_op_bench_can_run_has_its_own_clearly_different_colour() -> None:
    colors = op_colors(ALL_OPS)
    assert len(PALETTE) >= len(ALL_OPS)
    assert len(set(colors.values())) == len(ALL_OPS)
    for first, second in itertools.combinations(PALETTE, 2):
        distance = sum((a - b) ** 2 for a, b in zip(rgb(first), rgb(second), strict=True)) ** 0.5
        assert distance > 0.2, (first, second)


def test_an_op_keeps_its_colour_from_chart_to_chart() -> None:
    assert op_colors(["matvec", "copy"])["copy"] == op_colors(["copy", "saxpy"])["copy"]
    added = op_colors([*ALL_OPS, "negate"])["negate"]
    assert added not in op_colors(ALL_OPS).values()


def test_the_saved_rows_are_told_apart() -> None:
    assert kind_of(rows_of(VECTOR)) == "kernels"
    assert kind_of(rows_of(MEMORY)) == "memory"
    assert kind_of([{"bench": "device", "name": "x"}]) is None


def test_the_memory_series_are_each_path_each_way_and_the_copy_engine() -> None:
    series = memory_series(rows_of(MEMORY))
    assert list(series)[:4] == ["pageable", "pinned", "registered", "imported"]
    assert list(series)[-1] == "copy engine (vkCmdCopyBuffer)"
    assert set(series["pinned"]["upload"]) == {1 << 26, 1 << 30}
    assert series["pinned"]["upload"][1 << 30] == 50.96
    # The sweep's best setting per size, not the default one.
    assert series["pageable, best setting of the sweep"]["upload"][1 << 26] == 26.01


def test_a_file_that_holds_no_rows_is_refused_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    with pytest.raises(ValueError, match=r"^--from .*empty\.json: expected a list"):
        load_rows(empty)
    with pytest.raises(ValueError, match="No such file"):
        load_rows(tmp_path / "absent.json")
    assert load_rows(MATRIX) == rows_of(MATRIX)


@needs_matplotlib
def test_a_compared_run_is_drawn_as_its_ratio_per_op_and_size() -> None:
    from gpulab.diagnostics.bench_plot import kernels_figure  # noqa: PLC0415

    figure, drawn = kernels_figure(rows_of(VECTOR))
    assert drawn == "ratio"
    (axes,) = figure.axes
    assert axes.get_ylim()[0] == 0
    assert [t.get_text() for t in axes.get_xticklabels()] == ["$2^{26}$", "$2^{28}$"]
    assert any(list(line.get_ydata()) == [1.0, 1.0] for line in axes.get_lines())
    assert "torch" in axes.get_ylabel()
    assert "NVIDIA H200" in figure._suptitle.get_text()
    ops = list(dict.fromkeys(r["op"] for r in rows_of(VECTOR) if "vs_torch" in r))
    assert len(axes.patches) == 2 * len(ops)  # a bar per op and size
    legend = figure.legends[0]
    colors = {
        t.get_text(): h.get_facecolor()
        for t, h in zip(legend.texts, legend.legend_handles, strict=True)
        if t.get_text() in ops
    }
    assert [t.get_text() for t in legend.texts] == [*ops, "1.0 = torch"]
    assert len({colors[op] for op in ops}) == len(ops)
    heights = sorted(round(p.get_height(), 6) for p in axes.patches)
    vs_torch = sorted(round(r["vs_torch"], 6) for r in rows_of(VECTOR) if "vs_torch" in r)
    assert heights == vs_torch


@needs_matplotlib
def test_matrix_ops_get_their_own_panel_on_the_same_ratio_scale() -> None:
    from gpulab.diagnostics.bench_plot import kernels_figure  # noqa: PLC0415

    figure, drawn = kernels_figure(rows_of(MATRIX))
    assert drawn == "ratio"
    vector, matrix = figure.axes[:2]
    assert "elements" in vector.get_xlabel() and "matrix side" in matrix.get_xlabel()
    assert vector.get_ylim() == matrix.get_ylim()
    assert vector.get_ylim()[0] == 0 and vector.get_ylim()[1] > 4.1  # copy's 4.10 fits
    assert len({p.get_facecolor() for p in matrix.patches}) == 2  # matmul, matvec


@needs_matplotlib
def test_a_run_without_reference_is_drawn_as_gbps_against_size() -> None:
    from gpulab.diagnostics.bench_plot import kernels_figure  # noqa: PLC0415

    figure, drawn = kernels_figure(without_reference(VECTOR))
    assert drawn == "gbps"
    (axes,) = figure.axes
    assert axes.get_ylim()[0] == 0
    assert axes.get_xscale() == "log"
    assert "GB/s" in axes.get_ylabel()
    lines = axes.get_lines()
    assert len(lines) == 8  # copy and seven ops, no reference line
    assert len({line.get_color() for line in lines}) == 8


@needs_matplotlib
def test_the_memory_sweep_is_drawn_per_direction_from_zero() -> None:
    from gpulab.diagnostics.bench_plot import memory_figure  # noqa: PLC0415

    figure = memory_figure(rows_of(MEMORY))
    upload, readback = figure.axes[:2]
    for axes in (upload, readback):
        assert axes.get_ylim()[0] == 0
        assert axes.get_xscale() == "log"
        assert [t.get_text() for t in axes.get_xticklabels()] == ["64 MiB", "1 GiB"]
    assert "upload" in upload.get_title() and "readback" in readback.get_title()
    highest = max(
        v for s in memory_series(rows_of(MEMORY)).values() for d in s.values() for v in d.values()
    )
    assert upload.get_ylim() == readback.get_ylim() and upload.get_ylim()[1] > highest
    colors = [line.get_color() for line in upload.get_lines()]
    assert len(set(colors)) == len(colors) == len(memory_series(rows_of(MEMORY)))


@needs_matplotlib
def test_bench_from_saved_rows_redraws_each_chart_without_a_device(tmp_path: Path) -> None:
    env = no_driver_env() | {"PYTHONPATH": PYTHONPATH}
    for saved, kind in ((VECTOR, "ratio"), (MEMORY, "memory")):
        chart = tmp_path / f"{saved.stem}.png"
        done = gpulab("bench", "--from", str(saved), "--plot", str(chart), env=env)
        assert done.returncode == 0, done.stderr
        assert done.stderr == f"gpulab: {chart}: {kind} chart of {saved}\n"
        assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_from_needs_a_chart_to_draw(tmp_path: Path) -> None:
    done = gpulab("bench", "--from", str(VECTOR))
    assert done.returncode == 2
    assert (
        done.stderr
        == "gpulab: --from needs --plot OUT.png (the chart to draw from the saved rows)\n"
    )


@needs_matplotlib
def test_bench_from_a_file_of_no_rows_exits_2_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    done = gpulab("bench", "--from", str(bad), "--plot", str(tmp_path / "x.png"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"gpulab: --from {bad}: not JSON")
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "x.png").exists()


def test_bench_from_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    chart = tmp_path / "chart.png"
    done = gpulab(
        "bench", "--from", str(VECTOR), "--plot", str(chart), env=without_matplotlib(tmp_path)
    )
    assert done.returncode == 3
    assert done.stderr == (
        "gpulab: --plot needs matplotlib, which is not installed: pip install 'gpulab[plot]'\n"
    )
    assert not chart.exists()
