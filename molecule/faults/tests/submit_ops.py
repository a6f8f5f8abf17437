"""`gpulab submit` from this machine to the controller over SSH, as a user runs it.

The lab's controller has no sshd of its own (the roles do not install one): like
tests/submit/test_submit_lab.py, `SshSubmit.prepare` installs openssh-server there, authorises
a key made for this run for the job user and records the controller's host key, so the
submissions check it. sshd logs at VERBOSE, which records each connection it drops past
MaxStartups: the retries of many clients at once are visible in its journal.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko  # gpulab[submit]'s SSH library, in the test venv
from lab_ops import JOB_SCRIPTS, Lab, gpulab_result_complete

GRAPH = JOB_SCRIPTS / "drill-graph.json"
SSHD_DROPIN = "/etc/ssh/sshd_config.d/gpulab-drills.conf"
# A job waits in the queue while the 50 run two at a time per worker: minutes, not hours.
WAIT_TIMEOUT_S = 600


@dataclass(frozen=True)
class Submitted:
    """One `gpulab submit --wait`: its exit status, the result JSON and what it said."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def result(self) -> dict[str, Any] | None:
        try:
            document = json.loads(self.stdout)
        except ValueError:
            return None
        return document if isinstance(document, dict) else None

    @property
    def complete(self) -> bool:
        return self.returncode == 0 and gpulab_result_complete(self.stdout)

    @property
    def job_id(self) -> str:
        result = self.result or {}
        return str(result.get("slurm", {}).get("job_id", "?"))

    def last_line(self) -> str:
        lines = self.stderr.strip().splitlines()
        return lines[-1] if lines else ""

    @property
    def job_dir(self) -> str | None:
        """The job folder from gpulab's "submitted job N ...; files in DIR" line."""
        found = re.search(r"; files in (\S+)$", self.stderr, re.MULTILINE)
        return found.group(1) if found else None


@dataclass(frozen=True)
class SshSubmit:
    """How this machine reaches the controller: address, key and known_hosts."""

    lab: Lab
    address: str
    identity: Path
    known_hosts: Path

    @classmethod
    def prepare(cls, lab: Lab, folder: Path) -> SshSubmit:
        controller = lab.cluster.controller
        address = lab.run(controller, "hostname -I").stdout.split()[0]
        # Keys only (no password or keyboard-interactive login, no root), on the lab network's
        # address only; cleanup() removes it all again.
        settings = [
            "LogLevel VERBOSE",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin no",
            f"ListenAddress {address}",
        ]
        lab.run(
            controller,
            "command -v sshd >/dev/null || { apt-get update -qq && "
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null; } "
            f"&& printf '%s\\n' {' '.join(map(shlex.quote, settings))} > {SSHD_DROPIN} "
            "&& systemctl enable ssh && systemctl restart ssh",
            timeout=600,
        )
        key = paramiko.RSAKey.generate(2048)
        identity = folder / "id_rsa"
        key.write_private_key_file(str(identity))
        lab.run(
            controller,
            "umask 077 && mkdir -p ~/.ssh && touch ~/.ssh/authorized_keys && "
            "sed -i '/ gpulab-fault-drills$/d' ~/.ssh/authorized_keys && "
            "cat >> ~/.ssh/authorized_keys",
            user=lab.job_user,
            stdin=f"ssh-rsa {key.get_base64()} gpulab-fault-drills\n",
        )
        host_key = lab.run(controller, "cat /etc/ssh/ssh_host_ed25519_key.pub").stdout.split()
        known_hosts = folder / "known_hosts"
        known_hosts.write_text(f"{address} {host_key[0]} {host_key[1]}\n")
        return cls(lab, address, identity, known_hosts)

    def cleanup(self) -> None:
        """What prepare() added, removed: sshd stopped and disabled, its drop-in, the key."""
        self.lab.run(
            self.lab.cluster.controller,
            f"systemctl disable --now ssh; rm -f {SSHD_DROPIN}; "
            f"sed -i '/ gpulab-fault-drills$/d' ~{self.lab.job_user}/.ssh/authorized_keys",
            check=False,
        )

    def argv(self, *flags: str, graph: Path = GRAPH) -> list[str]:
        return [
            sys.executable,
            "-m",
            "gpulab",
            "submit",
            str(graph),
            "--host",
            f"{self.lab.job_user}@{self.address}",
            "--identity",
            str(self.identity),
            "--known-hosts",
            str(self.known_hosts),
            "--shared-dir",
            f"{self.lab.shared_dir}/jobs",  # the world-writable (sticky) folder for job files
            *flags,
        ]

    @staticmethod
    def env() -> dict[str, str]:
        """This checkout's payload first: the venv's editable gpulab may point elsewhere."""
        project = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).parents[3]))
        paths = [str(project / "payload/src"), os.environ.get("PYTHONPATH", "")]
        return os.environ | {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}

    def start(self, *flags: str) -> subprocess.Popen[str]:
        """`gpulab submit --wait` started in the background."""
        return subprocess.Popen(
            self.argv("--wait", "--timeout", str(WAIT_TIMEOUT_S), *flags),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(),
        )

    @staticmethod
    def finish(process: subprocess.Popen[str]) -> Submitted:
        stdout, stderr = process.communicate(timeout=WAIT_TIMEOUT_S + 120)
        return Submitted(process.returncode, stdout, stderr)

    def wait(self, *flags: str) -> Submitted:
        """`gpulab submit --wait`: the job's result or one line saying why not."""
        return self.finish(self.start(*flags))

    def sshd_drops_since(self, since: str) -> int:
        """Connections sshd dropped past MaxStartups since `since` (a journalctl time)."""
        out = self.lab.run(
            self.lab.cluster.controller,
            f"journalctl --no-pager --output=cat --unit=ssh --since='{since}' "
            "| grep -c 'past MaxStartups' || true",
        ).stdout
        return int(out.strip() or 0)
