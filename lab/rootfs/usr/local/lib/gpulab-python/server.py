"""gpulab-python's server: runs the Python that Ansible sends a lab node, forked from a process
that has already imported it.

Each Ansible module run starts a Python that spends most of its time importing
ansible.module_utils (basic and its dependencies: about 60 ms of a 110-130 ms run here, 0.6 s
of 0.9 s on the arm64 node under qemu). The lab's nodes run modules through
/usr/local/bin/gpulab-python3 (inventory/lab/group_vars/all/connection.yml), which hands its
standard streams, arguments, environment, working directory and umask to this server over a
Unix socket; the server reads the program (from the client's standard input, as Python
reads a pipelined module, or from the file named) and forks a worker that runs it as a fresh
`python3` would, then sends the client the worker's exit status.

The server imports Ansible's module_utils from the first module payload (AnsiballZ) it sees
and notes each file it imported (its CRC-32 and size in the zip); a payload whose copies of
those files differ (another ansible-core) or a program that is not an AnsiballZ payload runs
in a new /usr/bin/python3, as without the server. Workers find every other module of their
payload in its own zip.
Only root's runs come here (the socket is root's; the client runs any other user's
itself). This is the lab's, not the roles': real hosts run modules with their own Python.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import builtins
import contextlib
import datetime  # noqa: F401 - imported here once: the AnsiballZ wrapper imports it
import importlib.machinery
import io
import json  # noqa: F401 - as datetime, for every module
import locale
import marshal
import os
import re
import selectors
import shutil  # noqa: F401 - as datetime, for the wrapper
import signal
import socket
import struct
import subprocess  # noqa: F401 - as datetime, for most modules
import sys
import tempfile
import threading
import traceback
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOCKET = "/run/gpulab-python.sock"  # the client's too (gpulab-python3)
STORE = "/run/gpulab-python"  # the zip the server imported from
PYTHON = "/usr/bin/python3"
# What a module imports before its own code runs: the server imports it once.
PRELOAD = ("ansible.module_utils.basic", "ansible.module_utils._internal._ansiballz._loader")
ZIP_DATA = re.compile(rb"zip_data='([A-Za-z0-9+/=]+)'")
MAX_HEADER = 1 << 20


def payload_zip(program: bytes) -> bytes | None:
    """The module_utils zip of an AnsiballZ program, or None."""
    found = ZIP_DATA.search(program)
    return base64.b64decode(found.group(1)) if found else None


def zip_files(data: bytes) -> dict[str, tuple[int, int]]:
    """Each file of a zip: its CRC-32 and size, from the zip's directory."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as payload:
            return {info.filename: (info.CRC, info.file_size) for info in payload.infolist()}
    except zipfile.BadZipFile:
        return {}


class PayloadFinder:
    """Finds the ansible.* modules the server has not imported in the worker's own payload
    zip (the one the AnsiballZ wrapper put on sys.path), not in the server's: a package
    imported from the server's zip would otherwise look for its submodules there only."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> object:
        if name != "ansible" and not name.startswith("ansible."):
            return None
        payload = next((p for p in sys.path if p.endswith("_payload.zip")), None)
        if payload is None:
            return None
        folder = "/".join(name.split(".")[:-1])
        location = f"{payload}/{folder}" if folder else payload
        return importlib.machinery.PathFinder.find_spec(name, [location])


def interpreter() -> tuple[str, int, int]:
    """The Python a new process would run: when an upgrade replaces it, the server's own
    (the one its workers fork from) is out of date."""
    path = os.path.realpath(PYTHON)
    found = os.stat(path)
    return path, found.st_ino, found.st_mtime_ns


class Server:
    def __init__(
        self, socket_path: str = SOCKET, store: str = STORE, verbose: bool = False
    ) -> None:
        self.socket_path = socket_path
        self.store = store
        self.verbose = verbose
        # The files the server imported: None before the first payload, empty when that
        # import failed (every payload then runs in a new Python).
        self.imported: dict[str, tuple[int, int]] | None = None
        self.clients: dict[int, socket.socket] = {}
        self.interpreter = interpreter()
        self.stale = False  # Python was upgraded under the server: it ends when idle

    def matches(self, data: bytes | None) -> bool:
        """Whether the payload carries the very files the server imported."""
        if not self.imported or data is None:
            return False
        files = zip_files(data)
        return all(files.get(name) == crc_size for name, crc_size in self.imported.items())

    def preload(self, data: bytes) -> None:
        self.imported = {}
        files = zip_files(data)
        os.makedirs(self.store, mode=0o700, exist_ok=True)
        path = os.path.join(self.store, "module_utils.zip")
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        sys.path.insert(0, path)
        try:
            for name in PRELOAD:
                __import__(name)
        except Exception:  # any failure: every payload runs in a new Python
            traceback.print_exc()
            return
        finally:
            sys.path.remove(path)
        prefix = path + os.sep
        self.imported = {
            name: files[name]
            for module in list(sys.modules.values())
            if (name := (getattr(module, "__file__", None) or "").removeprefix(prefix)) in files
        }

    def serve(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        listener.bind(self.socket_path)
        os.umask(old)
        listener.listen(64)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        events = selectors.DefaultSelector()
        events.register(listener, selectors.EVENT_READ)
        events.register(wake_r, selectors.EVENT_READ)
        while True:
            for ready, _ in events.select():
                if ready.fileobj is listener:
                    conn, _ = listener.accept()
                    try:
                        self.accept(conn, listener, events)
                    except Exception:  # one bad request never stops the server
                        traceback.print_exc()
                        conn.close()
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
            self.reap()
            if self.stale:
                # New clients run python3 themselves; systemd starts the server again, on
                # the new Python, once the last worker has ended (Restart=always).
                if listener.fileno() >= 0:
                    events.unregister(listener)
                    listener.close()
                    os.unlink(self.socket_path)
                    print("gpulab-python: Python was replaced", file=sys.stderr, flush=True)
                if not self.clients:
                    return

    def reap(self) -> None:
        while self.clients:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.clients.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack("!ci", b"x", code))
            conn.close()

    def accept(
        self, conn: socket.socket, listener: socket.socket, events: selectors.BaseSelector
    ) -> None:
        uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
        if uid != 0:
            conn.close()
            return
        size = struct.unpack("!I", recv_exactly(conn, 4))[0]
        if size > MAX_HEADER:
            conn.close()
            return
        blob, fds, _, _ = socket.recv_fds(conn, size, 3)
        blob += recv_exactly(conn, size - len(blob))
        request = marshal.loads(blob)
        if len(fds) != 3:
            raise ConnectionError("the client sent no standard streams")
        argv: list[bytes] = request["argv"]
        if argv:
            with open(os.path.join(request["cwd"], argv[0]), "rb") as f:
                program = f.read()
        else:
            with open(os.dup(fds[0]), "rb", closefd=True) as f:
                program = f.read()
        data = payload_zip(program)
        self.stale = self.stale or interpreter() != self.interpreter
        in_process = not self.stale and self.matches(data)
        pid = os.fork()
        if pid == 0:
            events.close()
            listener.close()
            conn.close()
            worker(request, fds, program, in_process)  # never returns
        for fd in fds:
            os.close(fd)
        self.clients[pid] = conn
        if self.verbose:
            how = "in this process's Python" if in_process else "in a new Python"
            print(
                f"gpulab-python: {pid} runs {len(program)} bytes {how}", file=sys.stderr, flush=True
            )
        conn.sendall(struct.pack("!ci", b"p", pid))
        if data is not None and self.imported is None:
            self.preload(data)


def recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = conn.recv(size - len(data))
        if not more:
            raise ConnectionError("the client went away")
        data += more
    return data


def worker(request: dict, fds: list[int], program: bytes, in_process: bool) -> None:
    """Become the process `python3 [FILE ARGS]` would have been, and run the program."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        for name, value in request["env"]:
            os.environb[name] = value
        argv = [os.fsdecode(a) for a in request["argv"]] or [""]
        if not in_process:
            fresh_python(program, request["argv"])  # never returns
        locale.setlocale(locale.LC_CTYPE, "")
        sys.stdin = io.TextIOWrapper(
            io.FileIO(0, "rb", closefd=False), encoding="utf-8", errors="surrogateescape"
        )
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "wb", closefd=False),
            encoding="utf-8",
            errors="surrogateescape",
            line_buffering=os.isatty(1),
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "wb", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        sys.argv = argv
        # What python3 puts first on sys.path: the program's folder, or "" for standard input.
        if sys.path and sys.path[0] == HERE:
            sys.path[0] = os.path.dirname(os.path.realpath(argv[0])) if request["argv"] else ""
        tempfile.tempdir = None  # from this environment's TMPDIR when first asked
        sys.meta_path.insert(0, PayloadFinder)
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins
        filename = argv[0] if request["argv"] else "<stdin>"
        main.__file__ = filename  # as python3 sets it, "<stdin>" included
        sys.modules["__main__"] = main
        try:
            exec(compile(program, filename, "exec"), main.__dict__)
            code = 0
        except SystemExit as stop:
            code = exit_code(stop)
        except BaseException:  # what python3 does with an uncaught exception
            traceback.print_exc()
            code = 1
        try:
            threading._shutdown()  # type: ignore[attr-defined]
            atexit._run_exitfuncs()
        except BaseException:
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                code = code or 120
    finally:
        os._exit(code)


def exit_code(stop: SystemExit) -> int:
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code & 0xFF
    print(stop.code, file=sys.stderr)
    return 1


def fresh_python(program: bytes, argv: list[bytes]) -> None:
    """Run the program in a new interpreter, reading it from standard input as it was sent."""
    if argv:
        os.execv(PYTHON, [PYTHON, *argv])
    memory = os.memfd_create("program")
    os.write(memory, program)
    os.lseek(memory, 0, os.SEEK_SET)
    os.dup2(memory, 0)
    os.execv(PYTHON, [PYTHON])


def main() -> None:
    parser = argparse.ArgumentParser(description="The lab nodes' Python for Ansible modules.")
    parser.add_argument("--socket", default=SOCKET, help=f"where clients connect ({SOCKET})")
    parser.add_argument("--store", default=STORE, help=f"a folder of root's for its zip ({STORE})")
    parser.add_argument("--verbose", action="store_true", help="a line per run: how it runs")
    options = parser.parse_args()
    Server(options.socket, options.store, options.verbose).serve()


if __name__ == "__main__":
    main()
