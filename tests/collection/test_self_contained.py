"""gpulab.cluster works wherever it is installed: nothing in its roles, playbooks or templates
reaches outside the collection through a path climbing out of role_path or playbook_dir (an
installed collection has no checkout around it), and what the roles and playbooks write on
the control machine goes under the directory ansible-playbook runs in, unless a variable names
another place. molecule/site runs the installed tarball from a folder outside the repository."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "collections/ansible_collections/gpulab/cluster"
# A path built on role_path or playbook_dir: "{{ role_path }}/x/y" or role_path ~ '/x/y'.
ANCHORED = re.compile(
    r"(?:\{\{-?\s*(role_path|playbook_dir)\s*-?\}\}|\b(role_path|playbook_dir)\s*~\s*['\"])"
    r"(/[^'\"\s}]*)"
)
# Three levels up from anywhere in the collection is outside it (roles/NAME/tasks/../../..).
CLIMBING = re.compile(r"(?:\.\./){3,}|(?:/\.\.){3,}")


def _content() -> list[Path]:
    files = [
        path
        for folder in ("roles", "playbooks")
        for path in sorted((COLLECTION / folder).rglob("*"))
        if path.is_file() and path.suffix in (".yml", ".yaml", ".j2", ".md")
    ]
    assert len(files) > 50, "the scan finds nothing"
    return files


def _base(path: Path, anchor: str) -> Path:
    """Where role_path or playbook_dir points for this file in the installed collection."""
    relative = path.relative_to(COLLECTION).parts
    if anchor == "role_path":
        assert relative[0] == "roles", f"{path}: role_path outside a role"
        return COLLECTION / "roles" / relative[1]
    # The collection's playbooks run as gpulab.cluster.NAME: playbook_dir is their folder.
    return COLLECTION / "playbooks"


def test_no_path_climbs_out_of_the_collection() -> None:
    outside = []
    for path in _content():
        text = path.read_text()
        where = str(path.relative_to(COLLECTION))
        for match in ANCHORED.finditer(text):
            anchor = match[1] or match[2]
            resolved = Path(os.path.normpath(_base(path, anchor) / match[3].lstrip("/")))
            if not resolved.is_relative_to(COLLECTION):
                outside.append(f"{where}: {match[0]}")
        outside += [f"{where}: {m[0]}" for m in CLIMBING.finditer(text)]
    assert outside == []


def _defaults(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load(path.read_text()) or {}
    return loaded


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("roles/payload/defaults/main.yml", "payload_build_dir"),
        ("playbooks/validate.yml", "validate_report_dir"),
        ("playbooks/node_check.yml", "node_check_dir"),
    ],
)
def test_what_is_written_on_the_control_machine_goes_under_the_working_directory(
    source: str, name: str
) -> None:
    """The Jinja `'.' | realpath` is ansible-playbook's own working directory (its $PWD may be
    stale under another program, and a lookup of `pwd` runs in the playbook's folder)."""
    path = COLLECTION / source
    if source.startswith("roles/"):
        value = _defaults(path)[name]
    else:
        (play,) = [p for p in yaml.safe_load(path.read_text()) if name in p.get("vars", {})]
        value = play["vars"][name]
    assert str(value).startswith("{{ '.' | realpath }}/build/"), value


def test_the_payload_role_takes_its_default_source_from_the_collection() -> None:
    defaults = _defaults(COLLECTION / "roles/payload/defaults/main.yml")
    assert defaults["payload_sdist"] == "{{ role_path }}/files/gpulab.tar.gz"
    assert defaults["payload_source_dir"] == "" and defaults["payload_wheelhouse_dir"] == ""
    toolchains = defaults["payload_cross_toolchains"]
    assert isinstance(toolchains, dict)
    # Relative: in the source tree being built, which the sdist carries.
    assert toolchains["aarch64"]["cmake_toolchain_file"] == "native/cmake/aarch64-linux-gnu.cmake"
    assert (REPO / "payload" / toolchains["aarch64"]["cmake_toolchain_file"]).is_file()
