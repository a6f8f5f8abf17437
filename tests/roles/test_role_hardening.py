"""What the roles write and run, read from the roles themselves: shell commands quote every
variable, and systemd restarts munge and the Slurm daemons after a crash without a restart
now. (The refusals of bad settings are in test_role_validation.py; molecule checks the
running cluster.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jinja2 import Environment

ROOT = Path(__file__).resolve().parents[2]
SHELL = "ansible.builtin.shell"
# A Jinja expression, and the filters that make its value one shell word.
EXPRESSION = re.compile(r"{{(.*?)}}", re.DOTALL)
QUOTED = re.compile(r"\|\s*quote\s*$|map\(\s*'quote'\s*\)")


def _tasks(tasks: list[dict[str, Any]] | None) -> Iterator[dict[str, Any]]:
    """Every task, those inside blocks too."""
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _task_files() -> Iterator[Path]:
    yield from sorted((ROOT / "roles").glob("*/tasks/*.yml"))
    yield from sorted((ROOT / "roles").glob("*/handlers/*.yml"))
    yield from sorted((ROOT / "playbooks").glob("*.yml"))


def _shell_tasks() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in _task_files():
        content = yaml.safe_load(path.read_text()) or []
        plays = [p for p in content if "hosts" in p]
        lists = [p.get(k) for p in plays for k in ("tasks", "pre_tasks", "post_tasks", "handlers")]
        for tasks in lists if plays else [content]:
            for task in _tasks(tasks):
                if SHELL in task:
                    yield f"{path.relative_to(ROOT)}: {task['name']}", task


SHELL_TASKS = list(_shell_tasks())


def test_there_are_shell_tasks_to_check() -> None:
    assert len(SHELL_TASKS) >= 4, SHELL_TASKS


@pytest.mark.parametrize(("where", "task"), SHELL_TASKS, ids=[w for w, _ in SHELL_TASKS])
def test_shell_tasks_quote_every_variable(where: str, task: dict[str, Any]) -> None:
    """A path or name with a space, ';' or '$(...)' stays one word: every {{ }} in a shell
    command ends in `| quote` (or quotes each item of a list)."""
    args = task[SHELL]
    command = args["cmd"] if isinstance(args, dict) else args
    unquoted = [e.strip() for e in EXPRESSION.findall(command) if not QUOTED.search(e.strip())]
    assert not unquoted, f"{where}: unquoted in the shell command: {unquoted}"


DAEMONS = {"munge": ["munge"], "slurm": ["slurmctld", "slurmd", "slurmdbd"]}


@pytest.mark.parametrize("role", DAEMONS)
def test_daemons_restart_after_a_crash(role: str) -> None:
    """The drop-in says Restart=on-failure with the role's RestartSec, lands in each daemon's
    .service.d, and reloads systemd through a handler that restarts nothing."""
    template = (ROOT / "roles" / role / "templates/gpulab-restart.conf.j2").read_text()
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults/main.yml").read_text())
    assert defaults[f"{role}_restart_on_failure"] is True
    rendered = (
        Environment(keep_trailing_newline=True)
        .from_string(template)
        .render(ansible_managed="managed", item="daemon", **defaults)
    )
    assert "[Service]\nRestart=on-failure\nRestartSec=5\n" in rendered

    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks/configure.yml").read_text())
    writes = [
        t
        for t in tasks
        if t.get("ansible.builtin.template", {}).get("src") == "gpulab-restart.conf.j2"
    ]
    assert len(writes) == 1
    dest = writes[0]["ansible.builtin.template"]["dest"]
    paths = {Environment().from_string(dest).render(item=daemon) for daemon in DAEMONS[role]}
    expected = {f"/etc/systemd/system/{d}.service.d/gpulab-restart.conf" for d in DAEMONS[role]}
    assert paths == expected
    assert writes[0]["notify"] == f"{role} daemon-reload"

    handlers = yaml.safe_load((ROOT / "roles" / role / "handlers/main.yml").read_text())
    reload = [h for h in handlers if h.get("listen") == f"{role} daemon-reload"]
    assert [h["ansible.builtin.systemd_service"] for h in reload] == [{"daemon_reload": True}]
    assert handlers[0] is reload[0], "the reload runs before any restart handler"


def test_slurmctld_comes_back_without_waiting_for_its_helper() -> None:
    """After slurmctld was killed, systemd waited TimeoutStopSec (90 s) before the restart: 97 s
    in the faults lab with the default KillMode and with mixed (slurmscriptd SIGKILLed, then
    "Processes still around after SIGKILL" for 90 s: systemd in a container on cgroup v1 does
    not see the cgroup empty). KillMode=process waits for slurmctld alone; its helper exits by
    itself (faults lab, 6 Dec: back in 6.0, 5.9 and 6.2 s with RestartSec 5, one slurmscriptd
    left). slurmd keeps its own KillMode: its job steps must outlive a restart of slurmd."""
    template = (ROOT / "roles/slurm/templates/gpulab-restart.conf.j2").read_text()
    defaults = yaml.safe_load((ROOT / "roles/slurm/defaults/main.yml").read_text())

    def rendered(daemon: str) -> str:
        environment = Environment(keep_trailing_newline=True, trim_blocks=True)
        return environment.from_string(template).render(
            ansible_managed="managed", item=daemon, **defaults
        )

    assert "\nKillMode=process\n" in rendered("slurmctld")
    assert "KillMode" not in rendered("slurmd") and "KillMode" not in rendered("slurmdbd")
