"""inventory/example parses, uses the contract's groups, sets only variables that a role
declares, and keeps secrets in the vault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventory/example"


def _inventory() -> dict[str, Any]:
    command = Path(sys.executable).parent / "ansible-inventory"
    done = subprocess.run(
        [str(command), "-i", str(EXAMPLE), "--list"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    inventory: dict[str, Any] = json.loads(done.stdout)
    return inventory


def _role_variables() -> set[str]:
    names: set[str] = set()
    for spec in ROOT.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec.read_text())["argument_specs"].values():
            names.update(entry.get("options", {}))
    return names


def test_the_example_has_the_contracts_groups() -> None:
    inventory = _inventory()
    hosts = {
        group: set(inventory[group]["hosts"]) for group in ("controller", "storage", "workers")
    }
    assert hosts == {"controller": {"rpi5"}, "storage": {"rpi5"}, "workers": {"orin1", "orin2"}}


def test_every_setting_is_a_role_variable() -> None:
    declared = _role_variables()
    for path in sorted(EXAMPLE.glob("*_vars/**/*.yml")):
        for name in yaml.safe_load(path.read_text()):
            assert name.startswith("ansible_") or name in declared, (
                f"{path.relative_to(ROOT)}: {name} is no role's variable"
            )


def test_secrets_come_from_the_vault() -> None:
    hostvars = _inventory()["_meta"]["hostvars"]["rpi5"]
    assert hostvars["munge_key"] == "{{ vault_munge_key }}"
    assert hostvars["slurm_dbd_db_password"] == "{{ vault_slurm_dbd_db_password }}"


def test_host_vars_override_the_workers_group() -> None:
    hostvars = _inventory()["_meta"]["hostvars"]
    assert hostvars["orin1"]["slurm_node_features"] == ["jetson", "arm64"]
    assert hostvars["orin2"]["slurm_node_features"] == ["jetson", "arm64", "orin-nx"]
    assert hostvars["orin1"]["slurm_node_real_memory"] == 6144
    assert hostvars["orin2"]["slurm_node_real_memory"] == 13312
