"""Validation and scheduling stay linear in the number of outputs (20,000 took 14 s when every
membership test scanned the outputs tuple). Counted in string comparisons, not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpulab.backends.runner import split
from gpulab.graph import validate

OUTPUTS = 20_000


class CountedName(str):
    """A name that counts the equality tests made with it (a tuple scan makes one per item)."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        CountedName.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def many_outputs(count: int) -> dict[str, Any]:
    names = [CountedName(f"s{i}") for i in range(count)]
    return {
        "version": 1,
        "inputs": {"x": {"type": "vector", "data": [1.0, 2.0]}},
        "nodes": [{"id": name, "op": "sum", "inputs": {"x": "x"}} for name in names],
        "outputs": [CountedName(str(name)) for name in names],  # equal, not the same objects
    }


def test_validation_and_split_compare_names_a_linear_number_of_times() -> None:
    CountedName.comparisons = 0
    graph = validate(many_outputs(OUTPUTS), Path.cwd())
    segments = split(graph, "cpu")
    assert len(graph.outputs) == OUTPUTS
    assert len(segments[0][1].exports) == OUTPUTS
    # A linear pass compares each name a few times; the quadratic one made 2 x 10^8.
    assert CountedName.comparisons < 20 * OUTPUTS
