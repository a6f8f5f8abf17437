"""The payload's venv and the shared directory are each written once, as the default of the
variable that owns it (payload_venv; nfs_server_export_path on the storage host and
nfs_client_mount_point on the others): every other use in the collection's roles and playbooks,
the inventories, the lab and molecule's configuration names that variable (a play or another
role falls back on gpulab.cluster.role_default, which reads the owner's default). Defaults,
argument specs (and the READMEs generated from them), docs and tests may show the value."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OWNERS = {
    "/opt/gpulab/venv": ("payload_venv",),
    "/srv/gpulab": ("nfs_server_export_path", "nfs_client_mount_point"),
}
SCOPE = (
    "collections/ansible_collections/gpulab/cluster/roles/",
    "collections/ansible_collections/gpulab/cluster/playbooks/",
    "playbooks/",
    "site.yml",
    "inventory/",
    "lab/",
    "molecule/",
)
# Where the value may stand: the owner's default, its description, the docs and the witnesses.
NOT_CONFIGURATION = {"defaults", "tests", "docs"}
NOT_CONFIGURATION_FILES = {"argument_specs.yml", "README.md"}
# Configuration outside Ansible's variables, and why it keeps the value.
ALLOWED = {
    "lab/cluster.yml": "the lab's one definition of its share (shared_path), which the lab's "
    "inventory hands to the owners as lab_shared_path",
    "collections/ansible_collections/gpulab/cluster/roles/monitoring/files/gpulab-dashboard.json":
    "the Grafana dashboard's default for its mount point variable: a static file Grafana imports "
    "and a site changes there",
}  # fmt: skip


def _files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *SCOPE],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split("\0")  # fmt: skip
    return sorted(
        name for name in listed
        if name and (REPO / name).is_file()
        and not NOT_CONFIGURATION & set(Path(name).parts[:-1])
        and Path(name).name not in NOT_CONFIGURATION_FILES and name not in ALLOWED
    )  # fmt: skip


def test_the_literals_appear_only_as_their_owners_values() -> None:
    files = _files()
    assert len(files) > 100, "the scan finds nothing"
    found = []
    for name in files:
        try:
            text = (REPO / name).read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for literal, owners in OWNERS.items():
                if literal not in line:
                    continue
                # An inventory setting the owner itself: `payload_venv: /opt/gpulab/venv`.
                owner = rf"^\s*({'|'.join(owners)}):\s*[\"']?{re.escape(literal)}[\"']?\s*$"
                if not re.match(owner, line):
                    found.append(f"{name}:{number}: {line.strip()}")
    assert found == [], "name the variable that owns the value:\n" + "\n".join(found)


def test_every_allowed_file_still_holds_a_literal() -> None:
    """An allow-list entry whose file no longer needs it is removed."""
    for name in ALLOWED:
        text = (REPO / name).read_text()
        assert any(literal in text for literal in OWNERS), name
