"""One ansible-playbook run on local hosts, its result as ansible.posix.json's report: what the
role rendering tests share (a work directory holding hosts.json and play.yml)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from tests import ansible_fork

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run_playbook(work: Path, **env: str) -> dict[str, Any]:
    """Run work/play.yml against work/hosts.json with the repository's ansible.cfg and nothing
    from the caller's ANSIBLE_/MOLECULE_ settings (`env` adds to them); fail the test with
    the output's end unless it passed."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))}
    clean |= {
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_GATHERING": "explicit",
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_NOCOLOR": "1",
    } | env
    done = ansible_fork.run(
        [str(BIN / "ansible-playbook"), "-i", str(work / "hosts.json"), str(work / "play.yml")],
        cwd=ROOT, env=clean,
    )  # fmt: skip
    start = done.stdout.find("{")
    assert done.returncode == 0 and start >= 0, done.stdout[-3000:] + done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout[start:])
    return report
