"""`pip install 'gpulab[plot]'` brings what `gpulab bench --plot` imports; without it the
command stops before measuring, with one line naming the extra."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
from gpulab.diagnostics.bench_plot import PLOT_EXTRA

from tests.payload.test_cli import PYTHONPATH, gpulab

PAYLOAD = Path(__file__).resolve().parents[2] / "payload"
DIAGNOSTICS = PAYLOAD / "src" / "gpulab" / "diagnostics"


def modules_imported_by_name(path: Path) -> set[str]:
    """The top-level packages of every importlib.import_module("...") in path."""
    return {
        node.args[0].value.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and isinstance(node.args[0], ast.Constant)
    }


def test_the_plot_extra_holds_every_package_the_plot_imports() -> None:
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's tomllib reads pyproject")
    project = tomllib.loads((PAYLOAD / "pyproject.toml").read_text())["project"]
    requirements = project["optional-dependencies"][PLOT_EXTRA]
    names = {re.match(r"[A-Za-z0-9_.-]+", r)[0].lower() for r in requirements}  # type: ignore[index]
    assert modules_imported_by_name(DIAGNOSTICS / "bench_plot.py") == {"matplotlib"}
    assert modules_imported_by_name(DIAGNOSTICS / "bench.py") == set()
    assert names == {"matplotlib"}


def without_matplotlib(tmp_path: Path) -> dict[str, str]:
    """An environment in which `import matplotlib` fails, installed or not."""
    blocker = tmp_path / "blocker" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('matplotlib is blocked here')\n")
    path = os.pathsep.join(p for p in (str(blocker.parent), PYTHONPATH) if p)
    return dict(os.environ) | {"PYTHONPATH": path}


def test_plot_without_matplotlib_says_which_extra_in_one_line(tmp_path: Path) -> None:
    chart = tmp_path / "bench.png"
    done = gpulab(
        "bench",
        "--ops",
        "copy",
        "--sizes",
        "1024",
        "--plot",
        str(chart),
        env=without_matplotlib(tmp_path),
    )
    assert done.returncode == 3
    assert done.stderr == (
        "gpulab: --plot needs matplotlib, which is not installed: pip install 'gpulab[plot]'\n"
    )
    assert done.stdout == ""
    assert not chart.exists()
