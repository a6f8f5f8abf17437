"""tests/ansible_fork.py: a run forked from its server gives what a new process gives (the exit
status, standard output and error), standard input included, and a server serves its runs
one after another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ansible_fork

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
INVENTORY = "all:\n  hosts:\n    node1:\n      ansible_connection: local\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["ansible", "all", "-i", "/dev/stdin", "-o", "-m", "ansible.builtin.debug", "-a", "msg=hi"],
        ["ansible", "all", "-i", "/dev/stdin", "-o", "-m", "ansible.builtin.fail", "-a", "msg=no"],
        ["ansible-playbook", "-i", "/dev/stdin", "/nonexistent/play.yml"],
    ],
    ids=["passes", "fails", "no-playbook"],
)
def test_a_forked_run_is_what_a_process_gives(
    argv: list[str], request: pytest.FixtureRequest
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env |= {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    command = [str(BIN / argv[0]), *argv[1:]]
    alone = subprocess.run(command, input=INVENTORY, capture_output=True, text=True,
                           check=False, env=env, cwd=ROOT)  # fmt: skip
    forked = [ansible_fork.run(command, input=INVENTORY, env=env, cwd=ROOT) for _ in range(2)]
    for done in forked:
        assert (done.returncode, done.stdout, done.stderr) == (
            alone.returncode, alone.stdout, alone.stderr,
        )  # fmt: skip
    expected = {"passes": 0, "fails": 2, "no-playbook": 1}[request.node.callspec.id]
    assert alone.returncode == expected, alone.stdout + alone.stderr
