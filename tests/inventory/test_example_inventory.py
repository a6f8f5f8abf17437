"""inventory/example parses, uses the contract's groups, sets only variables that a role
declares (or the site's own `site_` values that role variables read), keeps secrets in the
vault, and has an x86_64 NVIDIA server whose driver packages and apt sources resolve for each
distribution it may run, passing every role's argument spec."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import ansible_fork

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventory/example"
BIN = Path(sys.executable).parent
# The vulkan role's check of its package lists (roles/vulkan/tasks/validate.yml).
PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
# What a documentation address stands in for: the site's mirror is the site's to set.
MIRROR = "http://192.0.2.1/debian"


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


def _members(inventory: dict[str, Any], group: str) -> set[str]:
    """The hosts of a group and of its children, as Ansible's groups[group] has them."""
    entry = inventory.get(group, {})
    hosts = set(entry.get("hosts", []))
    for child in entry.get("children", []):
        hosts |= _members(inventory, child)
    return hosts


def _checks(options: dict[str, Any]) -> dict[str, Any]:
    """An argument spec's options with what checks a value only: no description, and no
    default (defaults may be templates of the role's own, such as role_path)."""
    kept = ("type", "elements", "choices", "required")
    return {
        name: {key: value for key, value in option.items() if key in kept}
        | ({"options": _checks(option["options"])} if "options" in option else {})
        for name, option in options.items()
    }


# Roles that other roles import with parameters; no play applies them to a host, so a host's
# variables never carry their required arguments.
IMPORTED_ONLY = {"converge_gate"}


def _role_specs() -> dict[str, dict[str, Any]]:
    """Each role's main entry point options, by role (the roles plays apply to hosts)."""
    return {
        spec.parts[-3]: _checks(
            yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"]
        )
        for spec in sorted(ROOT.glob("roles/*/meta/argument_specs.yml"))
        if spec.parts[-3] not in IMPORTED_ONLY
    }


def _role_variables() -> set[str]:
    names: set[str] = set()
    for spec in ROOT.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec.read_text())["argument_specs"].values():
            names.update(entry.get("options", {}))
    return names


def _settings() -> dict[Path, dict[str, Any]]:
    return {p: yaml.safe_load(p.read_text()) for p in sorted(EXAMPLE.glob("*_vars/**/*.yml"))}


def test_the_example_has_the_contracts_groups() -> None:
    inventory = _inventory()
    hosts = {group: _members(inventory, group) for group in ("controller", "storage", "workers")}
    assert hosts == {
        "controller": {"rpi5"},
        "storage": {"rpi5"},
        "workers": {"orin1", "orin2", "gpu1"},
    }
    assert _members(inventory, "jetsons") == {"orin1", "orin2"}
    assert _members(inventory, "gpu_servers") == {"gpu1"}


def test_every_setting_is_a_role_variable() -> None:
    declared = _role_variables()
    for path, settings in _settings().items():
        for name in settings:
            assert name.startswith(("ansible_", "site_")) or name in declared, (
                f"{path.relative_to(ROOT)}: {name} is no role's variable"
            )


def test_every_site_value_is_read_by_a_role_variable() -> None:
    """`site_` values belong to no role: each must be read by a setting, or it is dead."""
    settings = _settings()
    site = {name for values in settings.values() for name in values if name.startswith("site_")}
    text = "\n".join(p.read_text() for p in settings)
    unread = sorted(name for name in site if not re.search(rf"{{{{[^}}]*\b{name}\b", text))
    assert unread == []


def test_secrets_come_from_the_vault() -> None:
    hostvars = _inventory()["_meta"]["hostvars"]["rpi5"]
    assert hostvars["munge_key"] == "{{ vault_munge_key }}"
    assert hostvars["slurm_dbd_db_password"] == "{{ vault_slurm_dbd_db_password }}"


def test_host_vars_override_the_group() -> None:
    hostvars = _inventory()["_meta"]["hostvars"]
    assert hostvars["orin1"]["slurm_node_features"] == ["jetson", "arm64"]
    assert hostvars["orin2"]["slurm_node_features"] == ["jetson", "arm64", "orin-nx"]
    assert hostvars["orin1"]["slurm_node_real_memory"] == 6144
    assert hostvars["orin2"]["slurm_node_real_memory"] == 13312


def test_the_jetson_settings_stay_off_the_server() -> None:
    hostvars = _inventory()["_meta"]["hostvars"]["gpu1"]
    assert hostvars["vulkan_driver"] == "nvidia"
    assert "slurm_node_real_memory" not in hostvars  # the facts' total, not a Jetson's share
    assert "jetson" not in hostvars["slurm_node_features"]


# The facts of each distribution a host of the example may run, as far as the settings and the
# roles' argument specs read them.
FACTS = {
    "debian12": {"distribution": "Debian", "distribution_release": "bookworm",
                 "distribution_major_version": "12", "distribution_version": "12.12",
                 "os_family": "Debian"},
    "ubuntu2204": {"distribution": "Ubuntu", "distribution_release": "jammy",
                   "distribution_major_version": "22", "distribution_version": "22.04",
                   "os_family": "Debian"},
    "ubuntu2404": {"distribution": "Ubuntu", "distribution_release": "noble",
                   "distribution_major_version": "24", "distribution_version": "24.04",
                   "os_family": "Debian"},
}  # fmt: skip
ARCH = {"gpu1": "x86_64", "orin1": "aarch64", "rpi5": "aarch64"}


def _resolve(host: str, system: str, tmp_path: Path) -> dict[str, Any]:
    """Run, on the control machine only, a play for `host` of the example that reports as
    `system`: every role's argument spec checks the host's settings (templated, as at a role's
    start), and the vulkan role's own variables give the NVIDIA packages it would install.
    Returns the templated settings and the vulkan role's package lists."""
    facts = FACTS[system] | {"architecture": ARCH[host], "processor_vcpus": 8,
                             "memtotal_mb": 65536, "hostname": host}  # fmt: skip
    roles = ROOT / "roles"
    play = [{
        "name": f"the example's {host} as {system}",
        "hosts": host,
        "gather_facts": False,
        "vars": {"ansible_facts": facts},
        "tasks": [
            *({"name": f"{role}'s argument spec",
               "ansible.builtin.validate_argument_spec": {"argument_spec": options}}
              for role, options in _role_specs().items()),
            {"name": "the vulkan role's variables",
             "ansible.builtin.include_vars": {"file": str(roles / "vulkan/vars/main.yml")}},
            {"name": "the vulkan role's distribution variables",
             "ansible.builtin.include_vars": {
                 "file": str(roles / f"vulkan/vars/{facts['distribution']}.yml")}},
            {"name": "report", "ansible.builtin.debug": {"msg": {
                "vulkan_packages": "{{ _vulkan_packages }}",
                "apt_sources_repositories": "{{ apt_sources_repositories | default([]) }}",
                "vulkan_driver": "{{ vulkan_driver | default('auto') }}",
            }}},
        ],
    }]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))}
    env |= {
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_NOCOLOR": "1",
    }
    secrets = {"vault_munge_key": "A" * 64, "vault_slurm_dbd_db_password": "secret",
               "site_debian_mirror": MIRROR}  # fmt: skip
    done = ansible_fork.run(
        [str(BIN / "ansible-playbook"), "-i", str(EXAMPLE), str(tmp_path / "play.yml"),
         "-e", json.dumps(secrets)],
        cwd=ROOT, env=env,
    )  # fmt: skip
    start = done.stdout.find("{")
    assert done.returncode == 0 and start >= 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads(done.stdout[start:])
    result: dict[str, Any] = report["plays"][0]["tasks"][-1]["hosts"][host]["msg"]
    return result


@pytest.mark.parametrize("system", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_the_nvidia_server_resolves_its_driver_per_distribution(
    system: str, tmp_path: Path
) -> None:
    resolved = _resolve("gpu1", system, tmp_path)
    assert resolved["vulkan_driver"] == "nvidia"
    packages = resolved["vulkan_packages"]["nvidia"]
    assert packages and all(PACKAGE_NAME.match(p) for p in packages), packages
    assert "libvulkan1" in packages and "vulkan-tools" in packages
    assert "glslc" in packages  # the GLSL compiler of a graph's own kernels
    sources = resolved["apt_sources_repositories"]
    if system == "debian12":
        # non-free's driver and Vulkan ICD; the firmware from non-free-firmware.
        assert {"nvidia-driver", "nvidia-vulkan-icd", "linux-headers-amd64"} <= set(packages)
        assert [s["components"] for s in sources] == [["non-free", "non-free-firmware"]]
        assert sources[0]["uris"] == [MIRROR]
        assert sources[0]["suites"] == ["bookworm", "bookworm-updates"]
    else:
        # restricted's server branch (in Ubuntu's own sources): the ICD is in libnvidia-gl.
        assert any(re.fullmatch(r"nvidia-headless-\d+-server", p) for p in packages)
        assert any(re.fullmatch(r"libnvidia-gl-\d+-server", p) for p in packages)
        assert sources == []


@pytest.mark.parametrize(("host", "system"), [("orin1", "ubuntu2204"), ("rpi5", "debian12")])
def test_the_other_hosts_pass_every_argument_spec(host: str, system: str, tmp_path: Path) -> None:
    resolved = _resolve(host, system, tmp_path)
    assert resolved["apt_sources_repositories"] == []
    assert resolved["vulkan_driver"] == "auto"
