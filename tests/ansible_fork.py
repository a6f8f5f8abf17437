"""ansible-playbook and ansible for the tests, each run in a child forked from a Python that has
imported Ansible already.

The role tests make about a hundred small runs, and importing Ansible was most of each: 0.3 to
0.45 CPU-s of a 0.5 to 0.7 s run with one short play. Here a server process per environment
and working directory imports the programs' modules once, then forks a child for each run,
which calls the same `main` as the console script with the run's arguments, standard input
and output. Ansible reads ansible.cfg and its ANSIBLE_ variables while importing: a server
only runs programs for the environment and directory it was started with, so a child sees
what a new process would. One difference, by design: the children of one server share the
local temporary directory Ansible makes on import (C.DEFAULT_LOCAL_TMP), with its cache of
module payloads keyed by module name, so the tests that install the collection elsewhere
(tests/collection/test_packaging.py) start processes of their own.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

# The program's console-script module: its main(args) runs it, as `ansible-playbook` would.
PROGRAMS = {"ansible-playbook": "ansible.cli.playbook", "ansible": "ansible.cli.adhoc"}


class _Server:
    """A Python that has imported Ansible with one environment and working directory."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=cwd,
        )  # fmt: skip

    def run(self, argv: list[str], files: dict[str, str]) -> int:
        """Runs argv (argv[0] a name in PROGRAMS) with the files as its standard streams."""
        assert self.process.stdin and self.process.stdout
        request = {"argv": argv, **files}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the Ansible server for {argv} ended: exit {self.process.wait()}")
        rc: int = json.loads(answer)["rc"]
        return rc

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait()


# Idle servers, the last used last: a run takes one started for its environment and directory,
# or starts one, and gives it back. Only the last few are kept (each holds about 60 MB): the
# rendering tests give each run an environment of its own.
_Key = tuple[frozenset[tuple[str, str]], str]
MAX_IDLE = 4
_idle: list[tuple[_Key, _Server]] = []
_lock = threading.Lock()


@atexit.register
def _close_all() -> None:
    with _lock:
        servers = [server for _, server in _idle]
        _idle.clear()
    for server in servers:
        server.close()


def _take(key: _Key) -> _Server | None:
    with _lock:
        for index in range(len(_idle) - 1, -1, -1):
            if _idle[index][0] == key:
                return _idle.pop(index)[1]
    return None


def _give_back(key: _Key, server: _Server) -> None:
    with _lock:
        _idle.append((key, server))
        surplus = _idle[:-MAX_IDLE]
        del _idle[:-MAX_IDLE]
    for _, old in surplus:
        old.close()


def run(
    argv: list[str], *, env: dict[str, str], cwd: Path, input: str = ""
) -> subprocess.CompletedProcess[str]:
    """argv[0] is the program (a path or a name in PROGRAMS): what subprocess.run(argv,
    capture_output=True, text=True, check=False, env=env, cwd=cwd, input=input) returns."""
    program = Path(argv[0]).name
    if program not in PROGRAMS:
        raise ValueError(f"{program}: not one of {sorted(PROGRAMS)}")
    # pytest's PYTEST_CURRENT_TEST names the test and its phase: it would part runs that
    # Ansible sees alike, and Ansible does not read it.
    env = {name: value for name, value in env.items() if name != "PYTEST_CURRENT_TEST"}
    key = (frozenset(env.items()), str(cwd))
    server = _take(key) or _Server(env, cwd)
    with tempfile.TemporaryDirectory(prefix="ansible-fork-") as folder:
        files = {name: os.path.join(folder, name) for name in ("stdin", "stdout", "stderr")}
        for name, path in files.items():
            Path(path).write_text(input if name == "stdin" else "")
        rc = server.run([program, *argv[1:]], files)  # a server that ended is not reused
        _give_back(key, server)
        stdout, stderr = (Path(files[name]).read_text() for name in ("stdout", "stderr"))
    return subprocess.CompletedProcess(argv, rc, stdout, stderr)


def _serve() -> None:
    """The server: imports every program's module, then for each request line (JSON) forks a
    child that runs one program, and answers with its exit status. One run at a time."""
    # What the imports print (a library's deprecation warning), each child prints first, as
    # a new process would.
    with tempfile.TemporaryFile() as said:
        stderr = os.dup(2)
        os.dup2(said.fileno(), 2)
        try:
            mains = {
                name: importlib.import_module(module).main for name, module in PROGRAMS.items()
            }
        finally:
            sys.stderr.flush()
            os.dup2(stderr, 2)
            os.close(stderr)
        said.seek(0)
        import_stderr = said.read()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(mains[request["argv"][0]], request, import_stderr)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)


def _child(
    main: Callable[[list[str]], None], request: dict[str, Any], import_stderr: bytes
) -> NoReturn:
    code = 250  # Ansible's own status for an unexpected error
    try:
        for fd, name, flags in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY),
                                (2, "stderr", os.O_WRONLY)):  # fmt: skip
            os.dup2(os.open(request[name], flags), fd)
        os.write(2, import_stderr)
        sys.argv = request["argv"]
        main(sys.argv)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else int(done.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


if __name__ == "__main__":
    sys.path.pop(0)  # this folder: the tests' packages are not Ansible's imports
    _serve()
