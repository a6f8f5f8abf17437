"""lab/converge-reason.sh: when `make lab` may skip the converge. The parts that need no lab:
the record of what a converge read, and the reason named when it no longer holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "lab" / "converge-reason.sh"


def _reason(mark: Path, *args: str, **env: str) -> str:
    # The venv's python3 first, as under make: the record names ansible-core's version.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    result = subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, "PATH": path, "GPULAB_CONVERGE_MARK": str(mark), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_no_record_means_converge(tmp_path: Path) -> None:
    assert _reason(tmp_path / "converged") == "no converge of this lab recorded yet"


def test_the_record_lists_what_the_converge_reads(tmp_path: Path) -> None:
    mark = tmp_path / "converged"
    _reason(mark, "--record")
    lines = mark.read_text().splitlines()
    assert lines[0].startswith("ansible-core ")
    paths = {line.split(maxsplit=1)[1] for line in lines[1:]}
    for expected in (
        "site.yml",
        "inventory/lab/group_vars/all/connection.yml",
        "collections/ansible_collections/gpulab/cluster/roles/slurm/tasks/main.yml",
        "payload/pyproject.toml",
        "lab/cluster.yml",
    ):
        assert expected in paths
    assert not any(path.startswith(("tests/", "docs/")) for path in paths)


def test_a_changed_input_is_named(tmp_path: Path) -> None:
    mark = tmp_path / "converged"
    _reason(mark, "--record")
    lines = mark.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith("  site.yml"))
    lines[at] = "0" * 64 + "  site.yml"
    mark.write_text("\n".join(lines) + "\n")
    assert _reason(mark) == "site.yml changed since the last converge"


def test_converge_1_asks_for_a_converge(tmp_path: Path) -> None:
    mark = tmp_path / "converged"
    _reason(mark, "--record")
    assert _reason(mark, CONVERGE="1") == "asked for with CONVERGE=1"
