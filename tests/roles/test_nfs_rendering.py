"""The export as the nfs_server role writes it, in every mode it can write: nfs-ganesha's export
(VFS) and the kernel's exports(5) line, with root_squash, all_squash and the allowed
no_root_squash. Each takes requests from privileged ports only (ganesha's PrivilegedPort,
exports(5)'s secure): AUTH_SYS trusts the uid a client sends, and a user's own userspace client
(a port above 1024) claimed another user's uid on the share before."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from tests.roles.playbook import ROOT, run_playbook

TEMPLATES = ROOT / "roles/nfs_server/templates"
MODES = {
    "root_squash": ["rw", "sync", "root_squash", "no_subtree_check"],
    "all_squash": ["rw", "sync", "all_squash", "no_subtree_check"],
    "no_root_squash": ["ro", "no_root_squash"],
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    work = tmp_path_factory.mktemp("nfs")
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {mode: local | {"test_options": options} for mode, options in MODES.items()}
    (work / "hosts.json").write_text(json.dumps({"all": {"hosts": hosts}}))
    play = [{
        "name": "Render the export", "hosts": "all", "gather_facts": False,
        "vars_files": [str(ROOT / "roles/nfs_server/defaults/main.yml"),
                       str(ROOT / "roles/nfs_server/vars/main.yml")],
        "tasks": [{"name": "Render", "ansible.builtin.template": {
            "src": f"{TEMPLATES}/{{{{ item }}}}.j2",
            "dest": f"{work}/{{{{ inventory_hostname }}}}-{{{{ item }}}}", "mode": "0644"},
            "loop": ["gpulab-export.conf", "gpulab.exports"],
            # Task vars: above the role's defaults that vars_files brings in.
            "vars": {"nfs_server_export_options": "{{ test_options }}",
                     "nfs_server_clients": ["10.0.0.0/24"]}}],
    }]  # fmt: skip
    (work / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    run_playbook(work)
    return {
        mode: {
            "ganesha": (work / f"{mode}-gpulab-export.conf").read_text(),
            "kernel": (work / f"{mode}-gpulab.exports").read_text(),
        }
        for mode in MODES
    }


@pytest.mark.parametrize("mode", MODES)
def test_ganesha_takes_privileged_ports_only(
    rendered: dict[str, dict[str, str]], mode: str
) -> None:
    export = rendered[mode]["ganesha"]
    assert "    PrivilegedPort = true;" in export.splitlines()
    assert f"Squash = {mode};" in export


@pytest.mark.parametrize("mode", MODES)
def test_the_kernel_export_is_secure(rendered: dict[str, dict[str, str]], mode: str) -> None:
    (line,) = [line for line in rendered[mode]["kernel"].splitlines() if line.startswith("/")]
    options = line.split("(", 1)[1].rstrip(")").split(",")
    assert "secure" in options and "insecure" not in options
    assert mode in options
