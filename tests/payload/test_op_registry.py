"""The op registry: each op is one entry (gpulab.ops.entries), and no code outside an op's own
entry branches on its name (docs/ops.md). The scan reads the source: a comparison or match
against an op's name, or a table keyed by op names, outside the modules that define the ops,
fails."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from gpulab.ops.registry import ENTRIES, NODE_FORMS, OPS

PACKAGE = Path(__file__).resolve().parents[2] / "payload" / "src" / "gpulab"
NAMES = frozenset(ENTRIES) | frozenset(NODE_FORMS)
DEFINING = {
    PACKAGE / "ops" / "registry.py",
    *(PACKAGE / "ops" / "entries").glob("*.py"),
    PACKAGE / "kernels" / "op_recordings.py",
}
"""Where ops are defined: their entries, the registry, and the kernels' recording of each op
(kernels sit beside ops, so they register their recordings by name)."""
TABLE_KEYS = 4
"""A dict literal with this many op names among its keys is a table by op (a few, like a
summary's sum/min/max, are words that happen to be op names)."""


def _names_in(node: ast.expr) -> list[str]:
    """The op names among the string constants of `node` (a constant or a literal collection)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in NAMES else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for element in node.elts for name in _names_in(element)]
    return []


def branches_on_op_names(source: str, filename: str = "<source>") -> list[str]:
    """Each place in `source` that compares or matches with an op's name, or builds a table
    keyed by op names: "line: names"."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        names: list[str] = []
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                names += _names_in(operand)
        elif isinstance(node, ast.match_case):
            names += [
                sub.value.value
                for sub in ast.walk(node.pattern)
                if isinstance(sub, ast.MatchValue)
                and isinstance(sub.value, ast.Constant)
                and sub.value.value in NAMES
            ]
        elif isinstance(node, ast.Dict):
            keyed = [name for key in node.keys if key is not None for name in _names_in(key)]
            names += keyed if len(keyed) >= TABLE_KEYS else []
        if names:
            line = node.pattern.lineno if isinstance(node, ast.match_case) else node.lineno
            found.append(f"{line}: {', '.join(sorted(set(names)))}")
    return found


MODULES = sorted(path for path in PACKAGE.rglob("*.py") if path not in DEFINING)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_branches_on_an_op_name(path: Path) -> None:
    assert branches_on_op_names(path.read_text(), str(path)) == []


def test_the_scan_finds_what_it_forbids() -> None:
    source = """
if op == "jacobi": pass
if node.op in ("min", "max"): pass
match op:
    case "normalize": pass
TABLE = {"add": 1, "scale": 2, "saxpy": 3, "dot": 4}
SUMMARY = {"sum": 0, "min": 0, "max": 0, "l2": 0}
print("matmul")
"""
    assert branches_on_op_names(source) == [
        "2: jacobi",
        "3: max, min",
        "5: normalize",
        "6: add, dot, saxpy, scale",
    ]


def test_every_entry_is_whole() -> None:
    for name, entry in ENTRIES.items():
        assert entry.spec is OPS[name]
        assert callable(entry.reference_function), name
        assert entry.bench.bytes_moved(4, (4, 4, 4)) > 0, name
