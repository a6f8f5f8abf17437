"""Small checks of decoded JSON values, each adding a Problem at a JSON path."""

from __future__ import annotations

import math
from typing import Any

from gpulab._shown import shown
from gpulab.graph.problems import Problem

FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32: every value is float32, so a larger number would become infinity
(and overflow the GPU's push constants)."""


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean) that float32 holds: finite, at most FLOAT32_MAX in size."""
    if type(value) is float:  # the common case first, in one step: NaN compares false too
        return -FLOAT32_MAX <= value <= FLOAT32_MAX
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and abs(value) <= FLOAT32_MAX
    except OverflowError:  # an int too large for a float
        return False


def number_problem(value: Any) -> str:
    """Why `value` is not a graph number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (
            f"must be a finite float32 number (at most {FLOAT32_MAX:.8g} in size), "
            f"got {shown(value)}"
        )
    return f"must be a finite number, got {type_name(value)}"


def is_integer(value: Any) -> bool:
    """A JSON integer (not a boolean; 3.0 counts, as JSON does not tell them apart)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def type_name(value: Any) -> str:
    """The JSON name of a decoded value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def expect_object(value: Any, path: str, problems: list[Problem], node: str | None = None) -> bool:
    """True when `value` is an object; otherwise records the problem."""
    if isinstance(value, dict):
        return True
    problems.append(Problem(path, f"must be an object, got {type_name(value)}", node))
    return False


def unknown_keys(
    value: dict[str, Any],
    allowed: tuple[str, ...],
    path: str,
    problems: list[Problem],
    node: str | None = None,
) -> None:
    """Records every key of `value` that is not in `allowed` (typos such as `param`)."""
    for key in value:
        if key not in allowed:
            problems.append(
                Problem(
                    f"{path}.{key}" if path else key,
                    f"unknown key (allowed: {', '.join(allowed)})",
                    node,
                )
            )


def count(
    value: Any, path: str, problems: list[Problem], minimum: int = 1, node: str | None = None
) -> int | None:
    """An integer of at least `minimum` (a size or a count), or None after recording why not."""
    if not is_integer(value):
        problems.append(Problem(path, f"must be an integer, got {type_name(value)}", node))
        return None
    if value < minimum:
        problems.append(Problem(path, f"must be at least {minimum}, got {shown(int(value))}", node))
        return None
    return int(value)


def number(value: Any, path: str, problems: list[Problem], node: str | None = None) -> float | None:
    """A finite number, or None after recording why not."""
    if not is_number(value):
        problems.append(Problem(path, number_problem(value), node))
        return None
    return float(value)
