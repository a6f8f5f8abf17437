"""The role tests' shared fixture: this machine's facts, gathered once for every host name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import ansible_fork
from tests.roles.test_role_validation import BIN, HOSTS, ROOT, _env, _inventory


@pytest.fixture(scope="session")
def fact_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This machine's minimal facts, gathered once for every host name the cases use."""
    work = tmp_path_factory.mktemp("facts")
    inventory = work / "hosts.json"
    inventory.write_text(_inventory(HOSTS, {}))
    cache = work / "cache"
    done = ansible_fork.run(
        [str(BIN / "ansible"), "all", "-i", str(inventory), "-m", "ansible.builtin.setup",
         "-a", "gather_subset=min"],
        cwd=ROOT, env=_env(cache),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return cache
