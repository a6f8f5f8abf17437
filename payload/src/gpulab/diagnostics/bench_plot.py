"""Charts of benchmark rows: `gpulab bench --plot`, the memory benchmark's `--plot`, and
`gpulab bench --from RESULT.json --plot OUT.png` (a chart redrawn from saved rows, no GPU).

- Kernel rows (`gpulab bench --json`) of a run compared with a library (`--compare`, rows
  with `vs_<library>`): grouped bars of Vulkan's speed relative to the library per op and
  size, a line at 1.0. Without a reference: GB/s against size, one line per op.
- Memory rows (`python -m gpulab.diagnostics.memory_bench --json`): GB/s against transfer
  size per path, upload and readback side by side, the copy engine of the same run as the
  ceiling.

Every op keeps its colour from one qualitative palette in every chart; y axes start at 0.
matplotlib is optional (the `plot` extra) and imported only here, only when drawing.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpulab.backends import BackendUnavailable
from gpulab.diagnostics.bench_ops import ALL_OPS

PLOT_EXTRA = "plot"
"""The optional dependencies (payload/pyproject.toml) that bring what drawing imports."""
PALETTE = (
    "#1f77b4",  # the ten of matplotlib's tab10
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#800000",  # then maroon, navy, teal, magenta, gold, black-olive
    "#000075",
    "#469990",
    "#f032e6",
    "#e6b800",
    "#3b3b00",
)
"""Distinct colours, one per op (ALL_OPS first, in order), one per memory path."""
REFERENCE_STYLE = {"color": "black", "linestyle": "--", "linewidth": 1.2}
MIB = 1 << 20
ENGINE = "copy engine (vkCmdCopyBuffer)"
SWEEP_BEST = "pageable, best setting of the sweep"
MAPPED = "pageable into mapped VRAM"
SERIES_ORDER = (
    "pageable",
    "pinned",
    "registered",
    "imported",
    SWEEP_BEST,
    MAPPED,
    "torch pageable",
    "torch pinned",
    ENGINE,
)
"""The memory chart's series in the legend's order (others after them)."""


def require_matplotlib() -> None:
    """BackendUnavailable naming the extra when matplotlib is not installed."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        raise BackendUnavailable(
            f"--plot needs matplotlib, which is not installed: pip install 'gpulab[{PLOT_EXTRA}]'"
        ) from None


def _pyplot() -> Any:
    # Optional dependency, imported by name (it has no type stubs); Agg: no display needed.
    require_matplotlib()
    importlib.import_module("matplotlib").use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def op_colors(ops: Sequence[str]) -> dict[str, str]:
    """Each op's colour: its place in ALL_OPS, so an op has the same colour in every chart;
    ops another package adds take the colours after those."""
    others = [op for op in dict.fromkeys(ops) if op not in ALL_OPS]
    return {
        op: PALETTE[
            (ALL_OPS.index(op) if op in ALL_OPS else len(ALL_OPS) + others.index(op)) % len(PALETTE)
        ]
        for op in dict.fromkeys(ops)
    }


def load_rows(path: Path) -> list[dict[str, Any]]:
    """The rows saved by `gpulab bench --json` or the memory benchmark's `--json`;
    ValueError naming the file when it holds neither."""
    try:
        rows = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"--from {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--from {path}: not JSON ({exc})") from None
    if isinstance(rows, dict) and isinstance(rows.get("rows"), list):
        rows = rows["rows"]  # a run_bench result as a whole
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"--from {path}: expected a list of benchmark rows")
    if kind_of(rows) is None:
        raise ValueError(
            f"--from {path}: neither gpulab bench rows (op, n, gbps) nor memory benchmark rows"
        )
    return rows


def kind_of(rows: Sequence[dict[str, Any]]) -> str | None:
    """ "kernels" (gpulab bench), "memory" (the memory benchmark) or None."""
    if any("op" in r and "n" in r and "gbps" in r for r in rows):
        return "kernels"
    if any(r.get("bench") in ("path", "transfer") for r in rows):
        return "memory"
    return None


def plot(rows: Sequence[dict[str, Any]], path: Path) -> str:
    """Draw the chart the rows call for into `path`; returns which: "ratio", "gbps" or
    "memory"."""
    kind = kind_of(rows)
    if kind is None:
        raise ValueError("no benchmark rows to plot")
    figure, drawn = (memory_figure(rows), "memory") if kind == "memory" else kernels_figure(rows)
    _save(figure, path)
    return drawn


def plot_memory(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """The memory benchmark's chart (memory_figure) into `path`."""
    _save(memory_figure(rows), path)


def _save(figure: Any, path: Path) -> None:
    figure.savefig(path, dpi=120)
    _pyplot().close(figure)


# Kernels


def _reference(rows: Sequence[dict[str, Any]]) -> str | None:
    """The library the run compared with (the `vs_<library>` key of its rows), or None."""
    for row in rows:
        for key in row:
            if key.startswith("vs_") and row.get("backend") == "vulkan":
                return key[3:]
    return None


def _is_matrix(row: dict[str, Any]) -> bool:
    """Whether `n` is a matrix side: matrix ops' rows carry GFLOP/s."""
    return "gflops" in row


def _other_shape(row: dict[str, Any]) -> bool:
    shape = row.get("shape", [])
    return len(shape) == 3 and len(set(shape)) > 1


def _size_label(row: dict[str, Any]) -> str:
    if _other_shape(row):
        return "x".join(map(str, row["shape"]))
    n = int(row["n"])
    return f"$2^{{{n.bit_length() - 1}}}$" if n > 0 and n & (n - 1) == 0 else str(n)


def _panels(rows: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(x axis title, rows) for vector ops, then matrix ops, where there are any."""
    measured = [r for r in rows if r.get("gbps") is not None]
    panels = [
        ("elements (vector ops)", [r for r in measured if not _is_matrix(r)]),
        ("matrix side n (n x n; matmul MxKxN)", [r for r in measured if _is_matrix(r)]),
    ]
    return [(title, chosen) for title, chosen in panels if chosen]


def _device(rows: Sequence[dict[str, Any]]) -> str:
    return next((str(r["device"]) for r in rows if r.get("device")), "unknown device")


def kernels_figure(rows: Sequence[dict[str, Any]]) -> tuple[Any, str]:
    """The ratio to the reference per op and size where the run had one, else GB/s against
    size: the figure, and "ratio" or "gbps"."""
    plt = _pyplot()
    panels = _panels(rows)
    reference = _reference(rows)
    colors = op_colors([r["op"] for _, chosen in panels for r in chosen])
    widths = [
        max(
            2.0,
            len({_size_label(r) for r in chosen}) * (1.0 + 0.12 * len({r["op"] for r in chosen})),
        )
        if reference
        else 4.0
        for _, chosen in panels
    ]
    figure, axes_list = plt.subplots(
        1,
        len(panels),
        figsize=(min(13.0, 3.0 + 1.1 * sum(widths)), 5.5),
        sharey=bool(reference),
        width_ratios=widths,
        layout="constrained",
        squeeze=False,
    )
    handles: dict[str, Any] = {}
    top = 1.0
    for axes, (title, chosen) in zip(axes_list[0], panels, strict=True):
        if reference:
            top = max(top, _ratio_bars(axes, chosen, reference, colors, handles))
        else:
            _gbps_lines(axes, chosen, colors, handles)
        axes.set_xlabel(title)
        axes.set_ylim(bottom=0)
        axes.grid(True, axis="y", alpha=0.3)
    if reference:  # the panels share the y axis: room above the highest bar of all
        axes_list[0][0].set_ylim(0, top * 1.2)
    device = _device(rows)
    if reference:
        axes_list[0][0].set_ylabel(
            f"speed relative to {reference}\n({reference} time / Vulkan time; > 1: Vulkan faster)"
        )
        figure.suptitle(f"gpulab bench on {device}: Vulkan against {reference}")
    else:
        axes_list[0][0].set_ylabel("effective bandwidth (GB/s)\nbytes read + written / GPU time")
        figure.suptitle(f"gpulab bench on {device}: effective bandwidth")
    if reference:  # the reference line last, after the ops
        handles[f"1.0 = {reference}"] = handles.pop(f"1.0 = {reference}")
    figure.legend(handles.values(), handles.keys(), loc="outside right center", fontsize="small")
    return figure, "ratio" if reference else "gbps"


def _ratio_bars(
    axes: Any,
    rows: list[dict[str, Any]],
    reference: str,
    colors: dict[str, str],
    handles: dict[str, Any],
) -> float:
    """Groups of bars, one group per size, one bar per op, and the line at 1.0; returns the
    highest ratio."""
    key = f"vs_{reference}"
    ours = [r for r in rows if r.get("backend") == "vulkan" and key in r]
    groups = sorted({(r["n"], _other_shape(r), _size_label(r)) for r in ours})
    labels = [label for *_, label in groups]
    ops = list(dict.fromkeys(r["op"] for r in ours))
    width = 0.8 / max(1, len(ops))
    annotate = len(ours) <= 40
    for row in ours:
        place = labels.index(_size_label(row)) - 0.4 + width * (ops.index(row["op"]) + 0.5)
        bars = axes.bar(place, row[key], width, color=colors[row["op"]], label=row["op"])
        handles.setdefault(row["op"], bars)
        if annotate:
            axes.annotate(
                f"{row[key]:.3f}",
                (place, row[key]),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                rotation=90 if len(ops) > 3 else 0,
                fontsize="x-small",
            )
    line = axes.axhline(1.0, **REFERENCE_STYLE)
    handles.setdefault(f"1.0 = {reference}", line)
    axes.set_xticks(range(len(labels)), labels)
    return max([float(r[key]) for r in ours] + [1.0])


def _gbps_lines(
    axes: Any, rows: list[dict[str, Any]], colors: dict[str, str], handles: dict[str, Any]
) -> None:
    """GB/s against size (log2), one line per op (dashed for another backend than Vulkan);
    matmul's other shapes as crosses."""
    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for row in rows:
        if _other_shape(row):
            (point,) = axes.plot(row["n"], row["gbps"], "x", color=colors[row["op"]])
            handles.setdefault(f"{row['op']} (MxKxN)", point)
            continue
        series.setdefault((row["op"], row["backend"]), []).append((row["n"], row["gbps"]))
    for (op, backend), points in series.items():
        points.sort()
        style = "-" if backend == "vulkan" else "--"
        (line,) = axes.plot(*zip(*points, strict=True), style, color=colors[op], marker="o")
        handles.setdefault(op if backend == "vulkan" else f"{op} ({backend})", line)
    axes.set_xscale("log", base=2)


# Memory


def _size_text(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def memory_series(
    rows: Sequence[dict[str, Any]],
) -> dict[str, dict[str, dict[int, float]]]:
    """{series name: {"upload"/"readback": {bytes: GB/s}}} of the memory benchmark's rows:
    each Stager path at its default settings, the best setting of the sweep, mapped VRAM,
    torch's copies and the copy engine (the last, the ceiling)."""
    series: dict[str, dict[str, dict[int, float]]] = {}

    def add(name: str, nbytes: int, upload: float | None, readback: float | None) -> None:
        entry = series.setdefault(name, {"upload": {}, "readback": {}})
        for direction, value in (("upload", upload), ("readback", readback)):
            if value is not None:
                best = entry[direction].get(nbytes, 0.0)
                entry[direction][nbytes] = max(best, value)

    engine: dict[int, tuple[float, float]] = {}
    for row in rows:
        kind, nbytes = row.get("bench"), row.get("bytes")
        if "skipped" in row or not isinstance(nbytes, int):
            continue
        up, down = row.get("upload_gbps"), row.get("readback_gbps")
        if kind == "path":
            name = row["path"] if "stager" not in row else SWEEP_BEST
            add(name, nbytes, up, down)
            engine.setdefault(nbytes, (row["copy_engine_h2d_gbps"], row["copy_engine_d2h_gbps"]))
        elif kind == "transfer" and row.get("kind") == "device_mapped":
            add(MAPPED, nbytes, up, down)
        elif kind == "torch":
            add(f"torch {row['path']}", nbytes, up, down)
    for nbytes, (h2d, d2h) in engine.items():
        add(ENGINE, nbytes, h2d, d2h)
    order = {name: place for place, name in enumerate(SERIES_ORDER)}
    return dict(sorted(series.items(), key=lambda item: order.get(item[0], len(order))))


def memory_figure(rows: Sequence[dict[str, Any]]) -> Any:
    """GB/s against transfer size (log2) per path, upload and readback side by side."""
    plt = _pyplot()
    series = memory_series(rows)
    names = [name for name in series if name != ENGINE]
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    sizes = sorted({n for s in series.values() for d in s.values() for n in d})
    figure, axes_pair = plt.subplots(1, 2, figsize=(12, 5.5), sharey=True, layout="constrained")
    handles: dict[str, Any] = {}
    for axes, direction, title in zip(
        axes_pair,
        ("upload", "readback"),
        ("upload: host -> device", "readback: device -> host"),
        strict=True,
    ):
        for name, directions in series.items():
            points = sorted(directions[direction].items())
            if not points:
                continue
            if name == ENGINE:
                style: dict[str, Any] = dict(REFERENCE_STYLE)
            else:
                dashed = name.startswith("torch")
                style = {"color": colors[name], "linestyle": "--" if dashed else "-"}
            (line,) = axes.plot(*zip(*points, strict=True), marker="o", **style)
            handles.setdefault(name, line)
        axes.set_xscale("log", base=2)
        axes.set_xticks(sizes, [_size_text(n) for n in sizes])
        axes.minorticks_off()
        axes.set_xlabel("transfer size")
        axes.set_title(title)
        axes.grid(True, alpha=0.3)
    rates = [v for s in series.values() for d in s.values() for v in d.values()]
    axes_pair[0].set_ylim(0, max(rates, default=1.0) * 1.08)  # shared by both panels
    axes_pair[0].set_ylabel("GB/s (10^9 bytes one way per second)")
    device = next((r for r in rows if r.get("bench") == "device"), {})
    figure.suptitle(
        f"gpulab memory benchmark on {device.get('name', 'unknown device')}"
        + (f" (driver {device['driver']})" if device.get("driver") else "")
    )
    figure.legend(handles.values(), handles.keys(), loc="outside right center", fontsize="small")
    return figure
