"""The payload: gpulab in a venv on every worker, from the shared wheelhouse, on PATH."""

from __future__ import annotations

import json

from conftest import Cluster

VENV = "/opt/gpulab/venv"


def test_gpulab_in_the_venv_and_on_path(cluster: Cluster, worker: str) -> None:
    node = cluster.node(worker)
    link = node.file("/usr/local/bin/gpulab")
    assert link.is_symlink
    assert link.linked_to == f"{VENV}/bin/gpulab"


def test_installed_release_is_on_the_shared_storage(cluster: Cluster, worker: str) -> None:
    node = cluster.node(worker)
    release = node.file(f"{VENV}/gpulab-release").content_string.strip()
    shared = cluster.var("payload_shared_dir")
    assert node.file(f"{shared}/wheels/{release}").is_directory
    version = node.check_output(f"{VENV}/bin/python -c 'import gpulab; print(gpulab.__version__)'")
    assert release.startswith(version + "-")


def test_selftest_passes_as_the_job_user(cluster: Cluster, worker: str) -> None:
    user = cluster.var("identity_users")[0]["name"]
    out = cluster.node(worker).check_output("runuser -u %s -- gpulab selftest --json", user)
    report = json.loads(out)
    assert report["ok"] is True
    assert report["device"]["driver"] == "llvmpipe"
