"""The lab nodes' Python for Ansible modules (lab/rootfs: usr/local/bin/gpulab-python3 and
usr/local/lib/gpulab-python/server.py), run here for real with this machine's /usr/bin/python3
as the nodes run it: a program gives what python3 gives, served by a forked worker."""

from __future__ import annotations

import base64
import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible.executor import module_common
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader, module_loader
from ansible.template import Templar

ROOTFS = Path(__file__).resolve().parents[2] / "lab/rootfs"
CLIENT = ROOTFS / "usr/local/bin/gpulab-python3"
SERVER = ROOTFS / "usr/local/lib/gpulab-python/server.py"
PYTHON = "/usr/bin/python3"
# What a run prints of itself: compared between python3 and gpulab-python3.
PROBE = b"""import json, os, sys
import __main__
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "umask": os.umask(0o22),
                  "probe": os.environ.get("PROBE"), "path0": sys.path[0],
                  "file": getattr(__main__, "__file__", None), "name": __name__,
                  "stdin": sys.stdin.read()}))
print("to stderr", file=sys.stderr)
sys.exit(3)
"""
VOLATILE = {"atime", "mtime", "ctime"}

pytestmark = [
    pytest.mark.skipif(not os.path.exists(PYTHON), reason="no /usr/bin/python3, the nodes' Python"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the server serves root only"),
]


class Server:
    def __init__(self, folder: Path) -> None:
        self.socket = folder / "python.sock"
        self.log = folder / "server.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    PYTHON,
                    str(SERVER),
                    "--socket",
                    str(self.socket),
                    "--store",
                    str(folder / "store"),
                    "--verbose",
                ],
                stderr=log,
            )
        deadline = time.monotonic() + 10
        while not self.socket.exists():
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "the server made no socket in 10 s"
            time.sleep(0.02)

    def runs(self) -> list[str]:
        """How each run went, from the server's log: "new" or "in process"."""
        return [
            "in process" if "this process's" in line else "new"
            for line in self.log.read_text().splitlines()
            if " runs " in line
        ]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    served = Server(tmp_path)
    yield served
    served.process.terminate()
    served.process.wait(10)


def _run(
    command: list[str], program: bytes | None, socket: Path, cwd: Path, **env: str
) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    environment |= {"GPULAB_PYTHON_SOCKET": str(socket), **env}
    return subprocess.run(
        command,
        input=program,
        capture_output=True,
        cwd=cwd,
        env=environment,
        timeout=60,
        check=False,
    )


@functools.cache
def _plugins() -> None:
    init_plugin_loader()  # once: it warns when asked again


def _payload(module: str, args: dict[str, Any]) -> bytes:
    """The AnsiballZ program Ansible sends a host for this module run."""
    _plugins()
    found = module_loader.find_plugin_with_context(module)
    built = module_common.modify_module(
        module_name=module.rsplit(".", 1)[1],
        module_path=found.plugin_resolved_path,
        module_args=args,
        templar=Templar(loader=DataLoader(), variables={}),
        task_vars={"ansible_python_interpreter": PYTHON},
        module_compression="ZIP_DEFLATED",
    )
    return bytes(built.b_module_data)


def _result(out: bytes) -> dict[str, Any]:
    text = out.decode()
    result: dict[str, Any] = json.loads(text[text.index("{") :])
    stat = result.get("stat", {})
    for key in VOLATILE:
        stat.pop(key, None)
    return result


def test_a_module_runs_as_under_python3_and_then_in_the_server_s_python(
    server: Server, tmp_path: Path
) -> None:
    stat = _payload("ansible.builtin.stat", {"path": "/etc/passwd"})
    bad = _payload("ansible.builtin.stat", {"path": "/etc/passwd", "no_such_option": 1})
    plain = _run([PYTHON], stat, server.socket, tmp_path)
    first = _run([str(CLIENT)], stat, server.socket, tmp_path)
    second = _run([str(CLIENT)], stat, server.socket, tmp_path)
    refused = _run([str(CLIENT)], bad, server.socket, tmp_path)
    assert plain.returncode == first.returncode == second.returncode == 0, second.stderr
    assert _result(first.stdout) == _result(second.stdout) == _result(plain.stdout)
    assert _result(plain.stdout)["stat"]["exists"] is True
    assert refused.returncode == 1
    assert "no_such_option" in _result(refused.stdout)["msg"]
    # The first payload teaches the server its module_utils; the runs after it are forked.
    assert server.runs() == ["new", "in process", "in process"]


def test_a_payload_of_another_ansible_runs_in_a_new_python(server: Server, tmp_path: Path) -> None:
    stat = _payload("ansible.builtin.stat", {"path": "/etc/hostname"})
    assert _run([str(CLIENT)], stat, server.socket, tmp_path).returncode == 0
    # The same payload with another basic.py, as another ansible-core would send.
    data = re.search(rb"zip_data='([A-Za-z0-9+/=]+)'", stat)
    assert data is not None
    changed = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(base64.b64decode(data[1]))) as old,
        zipfile.ZipFile(changed, "w") as new,
    ):
        for info in old.infolist():
            body = old.read(info)
            new.writestr(
                info, body + b"\n# another\n" if info.filename.endswith("/basic.py") else body
            )
    other = stat.replace(data[1], base64.b64encode(changed.getvalue()))
    run = _run([str(CLIENT)], other, server.socket, tmp_path)
    assert run.returncode == 0, run.stderr
    assert _result(run.stdout)["stat"]["exists"] is True
    assert server.runs() == ["new", "new"]


@pytest.mark.parametrize("how", ["stdin", "file"])
def test_a_program_sees_what_python3_gives_it(server: Server, tmp_path: Path, how: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "probe.py").write_bytes(PROBE)
    args, program = ([], PROBE) if how == "stdin" else (["probe.py", "one", "two"], b"input")
    runs = [
        _run(
            ["sh", "-c", 'umask 027 && exec "$@"', "-", command, *args],
            program,
            server.socket,
            work,
            PROBE="set",
        )
        for command in (PYTHON, str(CLIENT))
    ]
    assert [r.returncode for r in runs] == [3, 3]
    assert runs[0].stdout == runs[1].stdout
    assert runs[1].stderr.decode().strip() == "to stderr"
    said = json.loads(runs[1].stdout)
    assert said["umask"] == 0o027 and said["probe"] == "set" and said["cwd"] == str(work)


def test_an_exception_and_a_signal_end_the_run_as_they_end_python3(
    server: Server, tmp_path: Path
) -> None:
    raised = _run([str(CLIENT)], b"raise ValueError('boom')\n", server.socket, tmp_path)
    assert raised.returncode == 1
    assert b"ValueError: boom" in raised.stderr
    killed = _run(
        [str(CLIENT)],
        b"import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
        server.socket,
        tmp_path,
    )
    assert killed.returncode == -15


def test_without_the_server_it_is_python3(tmp_path: Path) -> None:
    run = _run([str(CLIENT)], PROBE, tmp_path / "no.sock", tmp_path, PROBE="alone")
    assert run.returncode == 3
    assert json.loads(run.stdout)["probe"] == "alone"


def test_the_client_and_the_server_are_the_image_s(tmp_path: Path) -> None:
    """The unit starts the server the client reaches, with the interpreter the tests use."""
    unit = (ROOTFS / "etc/systemd/system/gpulab-python.service").read_text()
    assert f"ExecStart={PYTHON} /{SERVER.relative_to(ROOTFS)}" in unit
    assert os.access(CLIENT, os.X_OK)
    assert CLIENT.read_text().startswith(f"#!{PYTHON} -IS\n")
    wants = ROOTFS / "etc/systemd/system/multi-user.target.wants/gpulab-python.service"
    assert (
        wants.is_symlink()
        and wants.resolve() == ROOTFS / "etc/systemd/system/gpulab-python.service"
    )
    assert shutil.which("python3") and sys.version_info >= (3, 9)
