"""gpulab.cluster.converge_gate, the one converge gate that identity, munge, nfs_server, slurm and
monitoring import: real ansible-playbook runs of a small role that imports it as they do (its
record in a temporary folder), and each of the five roles' tasks/main.yml read for how they
import it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.roles.playbook import ROOT, run_playbook

GATED = ("identity", "munge", "nfs_server", "slurm", "monitoring")
GATE = ROOT / "roles/converge_gate"
RENDERED = "{{ lookup('ansible.builtin.template', 'demo.j2') }}"
# The small role: a setting (demo_gate_value) in a rendered file, its own gate variable.
DEMO_TASKS = """
- name: Check the gate
  ansible.builtin.import_role:
    name: gpulab.cluster.converge_gate
    rolespec_validate: false
  vars: &gate
    converge_gate_role: demo_gate
    converge_gate_enabled: "{{ demo_gate_converge_gate }}"
    converge_gate_inputs: "{{ _demo_gate_inputs }}"
    converge_gate_files: ["{{ demo_gate_file }}"]
    _converge_gate_record: "{{ demo_gate_record }}"

- name: Converge
  when: not __converge_gate.holds | default(false)
  ansible.builtin.copy:
    content: "{{ _demo_gate_inputs.rendered }}"
    dest: "{{ demo_gate_file }}"
    mode: "0644"

- name: Record
  when: not __converge_gate.holds | default(false)
  ansible.builtin.import_role:
    name: gpulab.cluster.converge_gate
    tasks_from: record
    rolespec_validate: false
  vars: *gate
"""


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    role = tmp_path / "demo_gate"
    for folder, name, text in [
        ("tasks", "main.yml", DEMO_TASKS),
        ("templates", "demo.j2", "value={{ demo_gate_value }}\n"),
        ("vars", "main.yml", f"_demo_gate_inputs:\n  rendered: \"{RENDERED}\"\n"),
    ]:  # fmt: skip
        (role / folder).mkdir(parents=True)
        (role / folder / name).write_text(text)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "hosts.json").write_text(json.dumps({"all": {"hosts": {"node1": local}}}))
    return role


def _converge(demo: Path, **settings: Any) -> tuple[str, bool]:
    """One run of the small role: the check's reason, and whether the role's task ran."""
    work = demo.parent
    play = [{
        "name": "The small role", "hosts": "all", "gather_facts": False,
        "vars": {"demo_gate_value": 1, "demo_gate_converge_gate": True,
                 "demo_gate_record": str(work / "converged/demo_gate.json"),
                 "demo_gate_file": str(work / "demo.conf")} | settings,
        "roles": [{"role": str(demo)}],
    }]  # fmt: skip
    (work / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    report = run_playbook(work)["plays"][0]["tasks"]
    tasks = {t["task"]["name"].rpartition(" : ")[2]: t["hosts"]["node1"] for t in report}
    check = tasks["Check whether this host's last converge still holds for demo_gate"]
    converged = not tasks["Converge"].get("skipped", False)
    assert converged == (not check.get("holds", False))
    return ("skipped" if check.get("skipped") else check["reason"]), converged


def test_the_gate_holds_until_settings_code_or_files_change(demo: Path) -> None:
    assert _converge(demo) == ("no record of a converge", True)
    assert _converge(demo) == ("", False)
    # A setting (here reaching a rendered file) opens the gate once.
    assert _converge(demo, demo_gate_value=2)[1] is True
    assert _converge(demo, demo_gate_value=2) == ("", False)
    # The importing role's own code: any file under its folder.
    (demo / "vars/main.yml").write_text((demo / "vars/main.yml").read_text() + "# edited\n")
    assert _converge(demo, demo_gate_value=2)[1] is True
    # A file it wrote, changed by hand.
    (demo.parent / "demo.conf").write_text("edited by hand\n")
    assert _converge(demo, demo_gate_value=2)[1] is True
    assert (demo.parent / "demo.conf").read_text() == "value=2\n"


def test_the_gate_off_runs_every_task_and_is_no_setting(demo: Path) -> None:
    _converge(demo)
    assert _converge(demo, demo_gate_converge_gate=False) == ("skipped", True)
    # The gate's own variable is not among the settings compared: turned on again, it holds.
    assert _converge(demo) == ("", False)


def _imports(role: str) -> list[dict[str, Any]]:
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks/main.yml").read_text())
    return [t for t in tasks if "ansible.builtin.import_role" in t]


@pytest.mark.parametrize("role", GATED)
def test_each_gated_role_imports_the_gate_with_its_own_values(role: str) -> None:
    """The check before the role's converge.yml and the record after it, with the same values,
    each an option of the gate's argument specs (rolespec_validate is off: the values are the
    role's own, checked here), the gate variable the role's own."""
    specs = yaml.safe_load((GATE / "meta/argument_specs.yml").read_text())["argument_specs"]
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks/main.yml").read_text())
    check, record = _imports(role)
    assert check["ansible.builtin.import_role"] == {
        "name": "gpulab.cluster.converge_gate", "rolespec_validate": False}  # fmt: skip
    assert record["ansible.builtin.import_role"] == {
        "name": "gpulab.cluster.converge_gate", "tasks_from": "record", "rolespec_validate": False
    }  # fmt: skip
    assert check["vars"] == record["vars"]
    options = specs["main"]["options"]
    assert set(check["vars"]) <= set(options) and set(options) == set(specs["record"]["options"])
    assert {n for n, o in options.items() if o.get("required")} <= set(check["vars"])
    assert check["vars"]["converge_gate_role"] == role
    assert f"{role}_converge_gate" in check["vars"]["converge_gate_enabled"]
    converge = [t for t in tasks if t.get("ansible.builtin.include_tasks") == "converge.yml"]
    assert len(converge) == 1 and "not __converge_gate.holds" in converge[0]["when"]
    assert record["when"] == converge[0]["when"]
    assert tasks.index(check) < tasks.index(converge[0]) < tasks.index(record)


def test_only_the_gate_runs_converge_record() -> None:
    """The gate is written once: no other role calls the module itself."""
    calling = sorted(
        str(path.relative_to(ROOT / "roles"))
        for path in (ROOT / "roles").glob("*/tasks/*.yml")
        if "gpulab.cluster.converge_record" in path.read_text()
    )
    assert calling == ["converge_gate/tasks/main.yml", "converge_gate/tasks/record.yml"]
