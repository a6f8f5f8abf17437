"""The registry: every op's entry (gpulab.ops.entry), by name, in the contract's order.

Executors, selftest, bench, the tolerance policy, the JSON Schema and `gpulab validate` look
ops up here; an op's behaviour lives in its entry module under gpulab/ops/entries/.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpulab.ops.entries import elementwise, jacobi, linear, reductions
from gpulab.ops.entry import OpEntry
from gpulab.ops.spec import OpSpec, Shape

ENTRIES: Mapping[str, OpEntry] = {
    entry.name: entry
    for entry in (
        *elementwise.ENTRIES,
        *reductions.ENTRIES,
        *linear.ENTRIES,
        *jacobi.ENTRIES,
    )
}
"""Every op by name, in the order the schema, `validate` and selftest list them."""

OPS: Mapping[str, OpSpec] = {name: entry.spec for name, entry in ENTRIES.items()}
"""Every op's table row (inputs, params, result kind and shape rule), by name."""


def entry(name: str) -> OpEntry:
    """The entry of op `name` (KeyError if there is none)."""
    return ENTRIES[name]


def result_shape(op: str, shapes: Mapping[str, Shape]) -> Shape:
    """The result shape of `op` for input shapes of the right kinds (ShapeError otherwise)."""
    return OPS[op].shape(shapes)
