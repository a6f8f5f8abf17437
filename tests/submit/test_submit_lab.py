"""`gpulab submit` against the real lab: SSH to the controller with checked host keys, a real
Slurm job on a worker, the result read back. Skips, saying why, when the lab is not up or
not yet provisioned with the payload and the shared storage.

The fixture installs openssh-server in the controller container and authorises a key made for
the test run for the `gpulab` user; the host key is read from the container itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab.submit import DEFAULT_SHARED_DIR

from lab.cluster import place

# The lab's containers (lab/cluster.yml's place `lab`), unless the environment names others.
LAB = place("lab")
CONTROLLER = os.environ.get("GPULAB_LAB_CONTROLLER", LAB.group("controller")[0].name)
WORKERS = os.environ.get(
    "GPULAB_LAB_WORKERS", " ".join(c.name for c in LAB.group("workers"))
).split()
SHARED_DIR = os.environ.get("GPULAB_SHARED_DIR", DEFAULT_SHARED_DIR)
EXAMPLES = Path(__file__).resolve().parents[2] / "payload/examples"
JOB_TIMEOUT_S = "300"


def _podman(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *argv], input=stdin, capture_output=True, text=True, check=False, timeout=600
    )


def _as_gpulab(container: str, script: str) -> bool:
    return _podman("exec", "--user", "gpulab", container, "sh", "-c", script).returncode == 0


def _lab_missing() -> str | None:
    if shutil.which("podman") is None:
        return "podman is not installed"
    running = _podman("ps", "--format", "{{.Names}}").stdout.split()
    for container in (CONTROLLER, *WORKERS):
        if container not in running:
            return f"the lab is not up: no running {container} (bash lab/up.sh)"
    if not _as_gpulab(CONTROLLER, "command -v sbatch"):
        return f"Slurm is not installed on {CONTROLLER} (converge site.yml)"
    return None


def _cluster_unready() -> str | None:
    for container in WORKERS:
        if not _as_gpulab(container, "command -v gpulab"):
            return f"gpulab is not on the job PATH on {container} (the payload role installs it)"
    for container in (CONTROLLER, *WORKERS):
        if not _as_gpulab(container, f"test -d {SHARED_DIR} && test -w {SHARED_DIR}"):
            return f"{SHARED_DIR} is not a writable directory on {container} (the shared storage)"
    return None


@dataclass(frozen=True)
class Ssh:
    """How the test reaches the controller: its address, a key and a known_hosts file."""

    host: str
    identity: Path
    known_hosts: Path
    empty_known_hosts: Path


# What the fixture adds to the controller for the tests and removes after them: keys only
# (no password or keyboard-interactive login, no root), on the lab network's address only.
SSHD_DROPIN = "/etc/ssh/sshd_config.d/gpulab-submit-test.conf"
KEY_COMMENT = "gpulab-submit-test"


def _lab_address() -> str:
    return _podman(
        "inspect",
        "--format",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        CONTROLLER,
    ).stdout.strip()


@pytest.fixture(scope="module")
def ssh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ssh]:
    """sshd on the controller, a fresh key authorised for gpulab, its host key recorded;
    afterwards sshd stopped and disabled, its drop-in and the key gone."""
    missing = _lab_missing()
    if missing:
        pytest.skip(missing)
    paramiko = pytest.importorskip("paramiko", reason="paramiko (gpulab[submit]) is missing")
    address = _lab_address()
    install = (
        "command -v sshd >/dev/null || { apt-get update -qq && "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null; }; "
        f"printf '%s\\n' 'PasswordAuthentication no' 'KbdInteractiveAuthentication no' "
        f"'PermitRootLogin no' 'ListenAddress {address}' >{SSHD_DROPIN} && "
        "systemctl enable ssh >/dev/null 2>&1 && systemctl restart ssh"
    )
    done = _podman("exec", CONTROLLER, "sh", "-c", install)
    assert done.returncode == 0, done.stderr
    try:
        yield _authorised(tmp_path_factory, paramiko, address)
    finally:
        _podman(
            "exec", CONTROLLER, "sh", "-c",
            f"systemctl disable --now ssh >/dev/null 2>&1; rm -f {SSHD_DROPIN}; "
            f"sed -i '/ {KEY_COMMENT}$/d' ~gpulab/.ssh/authorized_keys",
        )  # fmt: skip


def _authorised(tmp_path_factory: pytest.TempPathFactory, paramiko: Any, address: str) -> Ssh:
    """A fresh key authorised for gpulab on the controller, and its host key recorded."""
    folder = tmp_path_factory.mktemp("ssh")
    key = paramiko.RSAKey.generate(2048)
    identity = folder / "id_rsa"
    key.write_private_key_file(str(identity))
    # The previous run's key is replaced, not kept.
    authorise = (
        "umask 077 && mkdir -p ~/.ssh && touch ~/.ssh/authorized_keys && "
        f"sed -i '/ {KEY_COMMENT}$/d' ~/.ssh/authorized_keys && "
        "cat >> ~/.ssh/authorized_keys"
    )
    public = f"ssh-rsa {key.get_base64()} {KEY_COMMENT}\n"
    done = _podman(
        "exec", "-i", "--user", "gpulab", CONTROLLER, "sh", "-c", authorise, stdin=public
    )
    assert done.returncode == 0, done.stderr
    host_key = _podman("exec", CONTROLLER, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
    assert host_key.returncode == 0, host_key.stderr
    key_type, key_data = host_key.stdout.split()[:2]
    known_hosts = folder / "known_hosts"
    known_hosts.write_text(f"{address} {key_type} {key_data}\n")
    empty = folder / "empty_known_hosts"
    empty.write_text("")
    return Ssh(address, identity, known_hosts, empty)


@pytest.fixture(scope="module")
def cluster(ssh: Ssh) -> Ssh:
    """The SSH access, once the workers have gpulab and the shared storage."""
    unready = _cluster_unready()
    if unready:
        pytest.skip(unready)
    return ssh


def _submit(
    ssh: Ssh, graph: Path, *flags: str, known_hosts: Path | None = None
) -> subprocess.CompletedProcess[str]:
    argv: Sequence[str] = [
        sys.executable,
        "-m",
        "gpulab",
        "submit",
        str(graph),
        "--host",
        f"gpulab@{ssh.host}",
        "--identity",
        str(ssh.identity),
        "--known-hosts",
        str(known_hosts or ssh.known_hosts),
        "--shared-dir",
        SHARED_DIR,
        *flags,
    ]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)


def test_an_unknown_host_key_is_refused(ssh: Ssh) -> None:
    done = _submit(ssh, EXAMPLES / "saxpy_norm.json", known_hosts=ssh.empty_known_hosts)
    assert done.returncode == 3, done.stderr
    assert f"gpulab@{ssh.host}: host key not in {ssh.empty_known_hosts}" in done.stderr


def test_a_wrong_key_is_refused(ssh: Ssh, tmp_path: Path) -> None:
    paramiko = pytest.importorskip("paramiko")
    stranger = tmp_path / "stranger"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(stranger))
    done = _submit(
        Ssh(ssh.host, stranger, ssh.known_hosts, ssh.empty_known_hosts),
        EXAMPLES / "saxpy_norm.json",
    )
    assert done.returncode == 3, done.stderr
    assert f"gpulab@{ssh.host}: authentication with key {stranger} failed" in done.stderr


def test_submit_over_ssh_returns_the_jobs_result(cluster: Ssh, tmp_path: Path) -> None:
    np.save(tmp_path / "v.npy", np.arange(1, 9, dtype=np.float32))
    graph = {
        "version": 1,
        "name": "submit-lab",
        "inputs": {"v": {"type": "vector", "file": "v.npy"}, "a": {"type": "scalar", "value": 2}},
        "nodes": [
            {"id": "s", "op": "scale", "inputs": {"x": "v", "a": "a"}},
            {"id": "n", "op": "sum", "inputs": {"x": "s"}},
        ],
        "outputs": ["s", "n"],
    }
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    done = _submit(cluster, path, "--wait", "--timeout", JOB_TIMEOUT_S, "--nodelist", "worker2")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["slurm"]["job_id"].isdigit()
    assert result["host"] == "worker2"
    assert result["outputs"]["n"]["value"] == 72.0
    assert result["outputs"]["s"]["data"] == [2.0 * i for i in range(1, 9)]
    assert f"job {result['slurm']['job_id']} COMPLETED on worker2 (exit code 0)" in done.stderr


def test_sbatch_refusing_the_job_exits_2(cluster: Ssh) -> None:
    done = _submit(cluster, EXAMPLES / "saxpy_norm.json", "--partition", "no-such-partition")
    assert done.returncode == 2, done.stderr
    assert "sbatch refused the job: " in done.stderr


def test_a_job_that_fails_reports_its_state_and_stderr(cluster: Ssh) -> None:
    done = _submit(
        cluster,
        EXAMPLES / "saxpy_norm.json",
        "--wait",
        "--timeout",
        JOB_TIMEOUT_S,
        "--gpulab",
        "/nonexistent/gpulab",
    )
    assert done.returncode == 4, done.stderr
    assert "FAILED" in done.stderr
    assert "(exit code 127); last lines of" in done.stderr
    assert "/nonexistent/gpulab" in done.stderr


def test_submit_on_the_controller_uses_sbatch_there(cluster: Ssh) -> None:
    if not _as_gpulab(CONTROLLER, "command -v gpulab"):
        pytest.skip(f"gpulab is not installed on {CONTROLLER}: the local transport runs there")
    graph = f"{SHARED_DIR}/submit-local-example.json"
    copy = _podman(
        "exec",
        "-i",
        "--user",
        "gpulab",
        CONTROLLER,
        "sh",
        "-c",
        f"cat > {graph}",
        stdin=(EXAMPLES / "jacobi.json").read_text(),
    )
    assert copy.returncode == 0, copy.stderr
    done = _podman(
        "exec",
        "--user",
        "gpulab",
        CONTROLLER,
        "gpulab",
        "submit",
        graph,
        "--shared-dir",
        SHARED_DIR,
        "--wait",
        "--timeout",
        JOB_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["slurm"]["job_id"].isdigit()
    assert result["host"] in {"worker1", "worker2"}
    assert "submitted job" in done.stderr and "on this machine" in done.stderr
