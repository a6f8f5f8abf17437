"""Where the payload role takes what it deploys from: a ready wheelhouse, a source tree or an
sdist (by default the one the collection's tarball carries). A missing source or a wheelhouse
without some worker's target is refused in one line that says what to set, before anything is
built or changed (real ansible-playbook runs in check mode, on local hosts named like the lab's;
tests/roles/test_node_check.py deploys a ready wheelhouse for real)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.roles.test_role_validation import GOOD, Case, _message, _run_playbook

# What the role runs before anything is built: its settings' checks, then the release's.
PLAY: dict[str, Any] = {
    "name": "payload sources",
    "hosts": "workers",
    "gather_facts": False,
    "tasks": [
        {"name": f"payload: {name}",
         "ansible.builtin.include_role": {"name": "payload", "tasks_from": name, "public": True}}
        for name in ("validate.yml", "release.yml")
    ],
}  # fmt: skip
TARGET = f"x86_64-cp{sys.version_info.major}{sys.version_info.minor}"


def _refusal(tmp_path: Path, fact_cache: Path, variables: dict[str, Any]) -> str:
    case = Case("payload-source", "payload", GOOD | variables, (), "worker1")
    run = _run_playbook(tmp_path, fact_cache, [PLAY], case)
    failures = {host: _message(r) for _, host, r in run.results() if r.get("failed")}
    assert run.rc != 0 and "worker1" in failures, run.text[-2000:]
    assert not [name for name, _, r in run.results() if r.get("changed")]
    assert "Traceback" not in run.text
    message = failures["worker1"].strip()
    assert "\n" not in message, message
    return message


def test_no_sdist_says_which_source_to_set(tmp_path: Path, fact_cache: Path) -> None:
    """A git install carries no sdist: the role names the three ways to give it a source."""
    message = _refusal(tmp_path, fact_cache, {"payload_sdist": str(tmp_path / "gpulab.tar.gz")})
    for name in ("payload_sdist", "payload_source_dir", "payload_wheelhouse_dir", "git install"):
        assert name in message, message


def test_a_source_tree_without_pyproject_is_refused(tmp_path: Path, fact_cache: Path) -> None:
    message = _refusal(tmp_path, fact_cache, {"payload_source_dir": str(tmp_path)})
    assert f"payload_source_dir ({tmp_path}) is no gpulab source tree" in message


def test_a_wheelhouse_without_a_workers_target_is_refused(tmp_path: Path, fact_cache: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    (wheelhouse / "aarch64-cp312").mkdir(parents=True)
    (wheelhouse / "aarch64-cp312/gpulab-0.1.0-py3-none-linux_aarch64.whl").write_bytes(b"x")
    message = _refusal(tmp_path, fact_cache, {"payload_wheelhouse_dir": str(wheelhouse)})
    assert f"payload_wheelhouse_dir ({wheelhouse}) has no wheelhouse for {TARGET}" in message
    assert "(it has aarch64-cp312)" in message
