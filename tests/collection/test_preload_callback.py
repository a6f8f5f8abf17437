"""gpulab.cluster.preload: the controller holds the settings of the plugins every task loads, so
the workers it forks inherit them instead of reading each plugin's documentation again."""

from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ansible_collections.gpulab.cluster.plugins.callback.preload import ROLE_LOOKUPS

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "collections/ansible_collections/gpulab/cluster"

# In a fresh interpreter: Ansible's configuration is process-wide.
PROBE = """
import json
from ansible import constants as C
from ansible.plugins.loader import callback_loader, init_plugin_loader

init_plugin_loader([COLLECTIONS])
BUILTIN = "ansible_collections.ansible.builtin.plugins."  # the name of one loaded by its FQCN
WANTED = [("connection", "ssh"), ("connection", BUILTIN + "connection.ssh"),
          ("connection", "local"), ("shell", "sh"), ("become", "sudo"),
          ("lookup", BUILTIN + "lookup.vars"), ("lookup", BUILTIN + "lookup.template")]
before = [C.config.has_configuration_definition(*w) for w in WANTED]
callback_loader.get("gpulab.cluster.preload")
after = [C.config.has_configuration_definition(*w) for w in WANTED]
print(json.dumps({"before": before, "after": after}))
"""


def _last_line_in_a_fresh_interpreter(code: str) -> str:
    """Run CODE in a new Python with the repository's ansible.cfg; its last line of output."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def test_the_callback_loads_the_settings_of_the_plugins_every_task_uses() -> None:
    code = PROBE.replace("COLLECTIONS", repr(str(REPO / "collections")))
    loaded = json.loads(_last_line_in_a_fresh_interpreter(code))
    assert not any(loaded["before"]) and all(loaded["after"]), loaded


def test_the_lab_and_molecule_enable_it() -> None:
    config = configparser.ConfigParser()
    config.read(REPO / "ansible.cfg")
    assert "gpulab.cluster.preload" in config["defaults"]["callbacks_enabled"]
    assert "gpulab.cluster.preload" in (REPO / ".config/molecule/config.yml").read_text()


def test_it_loads_every_builtin_lookup_the_roles_and_playbooks_call() -> None:
    """ROLE_LOOKUPS names them: a lookup added to a role without it still works, but each
    worker reads its documentation again."""
    called = {
        name
        for folder in ("roles", "playbooks")
        for path in (COLLECTION / folder).rglob("*.yml")
        for name in re.findall(r"(?:lookup|query)\(['\"]ansible\.builtin\.(\w+)", path.read_text())
    }
    assert called and called <= set(ROLE_LOOKUPS), sorted(called - set(ROLE_LOOKUPS))


def test_before_each_task_the_controllers_objects_are_frozen() -> None:
    """The workers fork after the task starts: their collections skip what is frozen."""
    code = f"""
import gc
from ansible.plugins.loader import callback_loader, init_plugin_loader
init_plugin_loader([{str(REPO / "collections")!r}])
callback = callback_loader.get("gpulab.cluster.preload")
gc.unfreeze()
kept = [[] for _ in range(1000)]  # tracked by the collector
callback.v2_playbook_on_task_start(None, False)
print(gc.get_freeze_count())
"""
    assert int(_last_line_in_a_fresh_interpreter(code)) > 0
