"""Graph inputs: parse and check each entry of `inputs` (its type and exactly one source)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from gpulab._shown import PATH_LIMIT, shown
from gpulab.graph._json import (
    count,
    expect_object,
    is_number,
    number,
    number_problem,
    type_name,
    unknown_keys,
)
from gpulab.graph.model import Data, Fill, GraphInput, Linspace, NpyFile, Random, Source
from gpulab.graph.problems import Problem
from gpulab.ops import Kind, Shape

SOURCES_OF_KIND: dict[Kind, tuple[str, ...]] = {
    Kind.SCALAR: ("value",),
    Kind.VECTOR: ("data", "random", "fill", "linspace", "file"),
    Kind.MATRIX: ("data", "random", "fill", "file"),
}
ALL_SOURCES = ("data", "value", "random", "fill", "linspace", "file")


def _extent(
    kind: Kind, raw: dict[str, Any], path: str, problems: list[Problem]
) -> tuple[Shape | None, tuple[str, ...]]:
    """The shape named by `n` (vector) or `rows`/`cols` (matrix), and the keys it used."""
    if kind is Kind.VECTOR:
        n = count(raw.get("n"), f"{path}.n", problems)
        return ((n,) if n is not None else None), ("n",)
    rows = count(raw.get("rows"), f"{path}.rows", problems)
    cols = count(raw.get("cols"), f"{path}.cols", problems)
    shape = (rows, cols) if rows is not None and cols is not None else None
    return shape, ("rows", "cols")


def _random(
    kind: Kind, raw: Any, path: str, problems: list[Problem]
) -> tuple[Shape | None, Source | None]:
    if not expect_object(raw, path, problems):
        return None, None
    shape, keys = _extent(kind, raw, path, problems)
    unknown_keys(raw, (*keys, "seed", "low", "high"), path, problems)
    seed = count(raw.get("seed", 0), f"{path}.seed", problems, minimum=0)
    low = number(raw.get("low", 0.0), f"{path}.low", problems)
    high = number(raw.get("high", 1.0), f"{path}.high", problems)
    if seed is None or low is None or high is None:
        return shape, None
    if low > high:
        problems.append(Problem(f"{path}.high", f"must be at least low ({low:g}), got {high:g}"))
        return shape, None
    return shape, Random(seed, low, high)


def _fill(
    kind: Kind, raw: Any, path: str, problems: list[Problem]
) -> tuple[Shape | None, Source | None]:
    if not expect_object(raw, path, problems):
        return None, None
    shape, keys = _extent(kind, raw, path, problems)
    unknown_keys(raw, (*keys, "value"), path, problems)
    value = number(raw.get("value"), f"{path}.value", problems)
    return shape, (Fill(value) if value is not None else None)


def _linspace(raw: Any, path: str, problems: list[Problem]) -> tuple[Shape | None, Source | None]:
    if not expect_object(raw, path, problems):
        return None, None
    shape, keys = _extent(Kind.VECTOR, raw, path, problems)
    unknown_keys(raw, (*keys, "start", "stop"), path, problems)
    start = number(raw.get("start"), f"{path}.start", problems)
    stop = number(raw.get("stop"), f"{path}.stop", problems)
    if start is None or stop is None:
        return shape, None
    return shape, Linspace(start, stop)


def _numbers(values: Any, path: str, problems: list[Problem]) -> int | None:
    """The length of a non-empty list of finite numbers (the first bad element is reported)."""
    if not isinstance(values, list):
        problems.append(Problem(path, f"must be an array of numbers, got {type_name(values)}"))
        return None
    if not values:
        problems.append(Problem(path, "must not be empty"))
        return None
    for i, value in enumerate(values):
        if not is_number(value):
            problems.append(Problem(f"{path}[{i}]", number_problem(value)))
            return None
    return len(values)


def _data(
    kind: Kind, raw: Any, path: str, problems: list[Problem]
) -> tuple[Shape | None, Source | None]:
    if kind is Kind.VECTOR:
        n = _numbers(raw, path, problems)
        return ((n,), Data(raw)) if n is not None else (None, None)
    if not isinstance(raw, list) or not raw:
        problems.append(Problem(path, "must be a non-empty array of rows (arrays of numbers)"))
        return None, None
    widths = [_numbers(row, f"{path}[{i}]", problems) for i, row in enumerate(raw)]
    if any(width is None for width in widths):
        return None, None
    for i, width in enumerate(widths):
        if width != widths[0]:
            problems.append(
                Problem(
                    f"{path}[{i}]",
                    f"ragged matrix: row {i} has {width} values but row 0 has {widths[0]}",
                )
            )
            return None, None
    return (len(raw), widths[0] or 0), Data(raw)


def _not_a_file(resolved: Path) -> str | None:
    """Why `resolved` cannot be read as an array file, or None. Only regular files (symlinks
    followed): opening a named pipe would block forever, a device would never end."""
    where = shown(str(resolved), quote=False, limit=PATH_LIMIT)
    try:
        mode = resolved.stat().st_mode
    except FileNotFoundError:
        return f"no such file (looked for {where})"
    except (OSError, ValueError) as exc:
        return f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if not stat.S_ISREG(mode):
        return f"not a regular file (looked at {where})"
    return None


def _file(
    kind: Kind, raw: Any, path: str, base_dir: Path, problems: list[Problem], *, check_values: bool
) -> tuple[Shape | None, Source | None]:
    if not isinstance(raw, str) or not raw.endswith(".npy") or "\0" in raw:
        problems.append(Problem(path, f"must be the path of a .npy file, got {shown(raw)}"))
        return None, None
    name = shown(raw, quote=False, limit=PATH_LIMIT)
    if Path(raw).is_absolute():
        problems.append(
            Problem(path, f"{name}: must be relative to the graph file's folder, not absolute")
        )
        return None, None
    resolved = base_dir / raw
    problem = _not_a_file(resolved)
    if problem is not None:
        problems.append(Problem(path, f"{name}: {problem}"))
        return None, None
    import numpy as np  # noqa: PLC0415 - only file inputs need numpy to validate

    try:
        array = np.load(resolved, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        problems.append(Problem(path, f"{name}: not a readable .npy array ({exc})"))
        return None, None
    shape = tuple(int(d) for d in array.shape)
    if array.dtype.kind not in "fiu":
        problems.append(Problem(path, f"{name}: holds {array.dtype}, expected numbers"))
        return None, None
    if len(shape) != kind.ndim:
        problems.append(Problem(path, f"{name}: has shape {list(shape)}, expected a {kind.value}"))
        return None, None
    if 0 in shape:
        problems.append(Problem(path, f"{name}: is empty (shape {list(shape)})"))
        return None, None
    from gpulab.graph.npy import first_bad_value  # noqa: PLC0415 - numpy, as above

    bad = first_bad_value(array) if check_values else None
    if bad is not None:
        problems.append(Problem(path, f"{name}: {bad}"))
        return None, None
    return shape, NpyFile(resolved, name, values_checked=check_values)


def parse_input(
    name: str, raw: Any, base_dir: Path, problems: list[Problem], check_values: bool = True
) -> GraphInput | None:
    """One entry of `inputs`, or None after recording every problem with it. Without
    `check_values` a .npy file's values are left to the reader (NpyFile.values_checked):
    its header, shape and size are still checked."""
    path = f"inputs.{name}"
    if not expect_object(raw, path, problems):
        return None
    type_text = raw.get("type")
    try:
        kind = Kind(type_text)
    except ValueError:
        problems.append(
            Problem(
                f"{path}.type", f"must be one of scalar, vector, matrix, got {shown(type_text)}"
            )
        )
        return None
    unknown_keys(raw, ("type", "description", *ALL_SOURCES), path, problems)
    given = [key for key in ALL_SOURCES if key in raw]
    allowed = SOURCES_OF_KIND[kind]
    if len(given) != 1:
        problems.append(
            Problem(path, f"a {kind.value} needs exactly one of {', '.join(allowed)}, got {given}")
        )
        return None
    source_key = given[0]
    source_path = f"{path}.{source_key}"
    if source_key not in allowed:
        problems.append(Problem(source_path, f"a {kind.value} takes one of {', '.join(allowed)}"))
        return None
    value = raw[source_key]
    shape: Shape | None
    source: Source | None
    if source_key == "value":
        scalar = number(value, source_path, problems)
        shape, source = ((), Data(scalar)) if scalar is not None else (None, None)
    elif source_key == "data":
        shape, source = _data(kind, value, source_path, problems)
    elif source_key == "random":
        shape, source = _random(kind, value, source_path, problems)
    elif source_key == "fill":
        shape, source = _fill(kind, value, source_path, problems)
    elif source_key == "linspace":
        shape, source = _linspace(value, source_path, problems)
    else:
        shape, source = _file(
            kind, value, source_path, base_dir, problems, check_values=check_values
        )
    if shape is None or source is None:
        return None
    return GraphInput(name, kind, shape, source)
