"""The payload's layers, read from the source: vk -> memory -> kernels/ops -> graph ->
placement -> backends -> results -> running -> diagnostics -> cli. No module imports a package of
a higher layer, and the CLI, a thin face, reaches the device only through the layers from
placement to diagnostics."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "payload" / "src" / "gpulab"
LAYER = {
    "_lazy": 0,
    "_closeable": 0,
    "_shown": 0,
    "_version": 0,
    "_cache": 0,
    "vk": 1,
    "native": 1,
    "shaders": 1,
    "memory": 2,
    "ops": 3,
    "kernels": 3,
    "compute": 4,
    "graph": 4,
    "placement": 5,
    "submit": 5,
    "backends": 6,
    "results": 7,
    "running": 8,
    "diagnostics": 9,
    "metrics": 9,
    "cli": 10,
    "__main__": 11,
    "__init__": 11,
}
"""Each top-level part of gpulab by layer; a part may import its own layer and those below."""
BELOW_THE_CLI = ("vk", "kernels", "memory", "native", "compute")
"""What the CLI never imports itself: it calls placement, backends, results, running and
diagnostics."""


def imported(path: Path) -> set[str]:
    """Every gpulab part `path` imports, at the top or inside a function."""
    parts = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            pieces = name.split(".")
            if pieces[0] == "gpulab" and len(pieces) > 1 and pieces[1] in LAYER:
                parts.add(pieces[1])
    return parts


def part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_has_a_layer() -> None:
    assert {part_of(path) for path in MODULES} <= LAYER.keys()


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_runs_up_a_layer(path: Path) -> None:
    own = LAYER[part_of(path)]
    upward = sorted(part for part in imported(path) if LAYER[part] > own)
    assert upward == [], f"{path.relative_to(PACKAGE)} imports a higher layer: {upward}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "cli").glob("*.py")), ids=lambda p: p.name)
def test_the_cli_imports_no_device_layer(path: Path) -> None:
    assert sorted(imported(path) & set(BELOW_THE_CLI)) == []
