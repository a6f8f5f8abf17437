"""gpulab.cluster.role_default: a role's own default, read where another play or role needs it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleLookupError
from ansible_collections.gpulab.cluster.plugins.lookup import role_default as plugin

ROLES = Path(__file__).resolve().parents[2] / "collections/ansible_collections/gpulab/cluster/roles"


@pytest.mark.parametrize(
    ("role", "name"),
    [("payload", "payload_venv"), ("nfs_server", "nfs_server_export_path"),
     ("nfs_client", "nfs_client_mount_point")],
)  # fmt: skip
def test_it_gives_the_owning_roles_default(role: str, name: str) -> None:
    defaults = yaml.safe_load((ROLES / role / "defaults/main.yml").read_text())
    assert plugin.LookupModule().run([name], {}) == [defaults[name]]
    assert isinstance(defaults[name], str) and defaults[name].startswith("/")


def test_the_longest_role_name_owns_the_variable(tmp_path: Path) -> None:
    for role, text in [("nfs", "nfs_server_x: short\n"), ("nfs_server", "nfs_server_x: long\n")]:
        (tmp_path / role / "defaults").mkdir(parents=True)
        (tmp_path / role / "defaults/main.yml").write_text(text)
    assert plugin.role_default("nfs_server_x", tmp_path) == "long"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("nobody_venv", "no role of the collection owns 'nobody_venv'"),
        ("payload_nothing", "the payload role has no default for 'payload_nothing'"),
        ("payload_storage_dir", "the payload role's payload_storage_dir is a template"),
    ],
)
def test_it_refuses_what_it_cannot_give(name: str, said: str) -> None:
    with pytest.raises(AnsibleLookupError, match=said):
        plugin.role_default(name)
