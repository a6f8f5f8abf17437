"""The registry: every op's entry (gpulab.ops.entry), by name, in the contract's order, then
the ops other packages add.

Executors, selftest, bench, the tolerance policy, the JSON Schema and `gpulab validate` look
ops up here; an op's behaviour lives in its entry module under gpulab/ops/entries/.

A package adds ops through the entry point group `gpulab.ops`: each entry point names an
OpEntry or a sequence of them. They are loaded on first need only, so that `import gpulab`
and a graph of built-in ops never scan the installed packages: when a name is not a built-in
op (`entry`, `find`) or when every op is listed (`entries`: the schema, `validate`'s list of
known ops, selftest). A package's op never replaces a built-in one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from gpulab.ops.entries import elementwise, jacobi, kernel, linear, reductions
from gpulab.ops.entry import OpEntry
from gpulab.ops.spec import OpSpec, Shape

GROUP = "gpulab.ops"
"""The entry point group through which packages add ops."""

ENTRIES: dict[str, OpEntry] = {
    entry.name: entry
    for entry in (
        *elementwise.ENTRIES,
        *reductions.ENTRIES,
        *linear.ENTRIES,
        *jacobi.ENTRIES,
    )
}
"""Every op by name, in the order the schema, `validate` and selftest list them: the
built-in ones, and those of other packages once loaded (see the module docstring)."""

OPS: dict[str, OpSpec] = {name: entry.spec for name, entry in ENTRIES.items()}
"""Every op's table row (inputs, params, result kind and shape rule), by name."""

BUILT_IN = tuple(ENTRIES)
"""The names of the ops gpulab itself defines."""

NODE_FORMS: dict[str, OpEntry] = {entry.name: entry for entry in kernel.ENTRIES}
"""Ops whose nodes have a form of their own (OpEntry.node_form: a user's kernel); `find`
and `entry` know them, but they are not among the ops listed (schema enum, selftest, bench)."""

PLUGIN_ERRORS: list[str] = []
"""Why an entry point of `gpulab.ops` was left out (it failed to load, or named no OpEntry)."""


def _plugin_entries(value: object) -> Iterable[OpEntry]:
    if isinstance(value, OpEntry):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, OpEntry) for v in value):
        return value
    raise TypeError(f"expected an OpEntry or a sequence of them, got {type(value).__name__}")


@functools.cache
def load_plugins() -> None:
    """Add the ops of the `gpulab.ops` entry points (once)."""
    from importlib import metadata  # noqa: PLC0415 - scanning packages only when needed

    for point in sorted(metadata.entry_points(group=GROUP), key=lambda p: p.name):
        try:
            added = list(_plugin_entries(point.load()))
        except Exception as exc:  # a broken package must not break gpulab
            PLUGIN_ERRORS.append(f"{GROUP} entry point {point.name!r} ({point.value}): {exc}")
            continue
        for entry in added:
            if entry.name not in ENTRIES:
                ENTRIES[entry.name] = entry
                OPS[entry.name] = entry.spec


def entries() -> Mapping[str, OpEntry]:
    """Every op, other packages' included."""
    load_plugins()
    return ENTRIES


def find(name: str) -> OpEntry | None:
    """The entry of op `name`, looking in other packages when it is not a built-in one."""
    found = ENTRIES.get(name) or NODE_FORMS.get(name)
    if found is None:
        load_plugins()
        found = ENTRIES.get(name)
    return found


def entry(name: str) -> OpEntry:
    """The entry of op `name` (KeyError if there is none)."""
    found = find(name)
    if found is None:
        raise KeyError(name)
    return found


def result_shape(op: str, shapes: Mapping[str, Shape]) -> Shape:
    """The result shape of `op` for input shapes of the right kinds (ShapeError otherwise)."""
    return entry(op).spec.shape(shapes)
