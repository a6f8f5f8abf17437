"""`gpulab worker --socket SOCKET`: runs the graphs that `gpulab run --worker SOCKET` hands it,
keeping what a new process would make again for each one open between them: the interpreter
and its imports, the Vulkan device, its memory pools, pipelines and staging ring.

One run at a time, in the order they connect (the device runs one graph at a time anyway).
Each run is the `gpulab run` command line its client gave, in the client's directory, writing
into the client's own stdout and stderr (passed over the socket); the worker's environment
applies, not the client's. Only the user who started the worker may use it: the socket is
made mode 0600 and each peer's uid is checked. SIGTERM or Ctrl-C stop the worker (after the
run in progress, which then ends with the contract's status); so does `--idle-exit`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import stat
import struct
import sys
import traceback
from collections.abc import Iterator
from typing import Any

from gpulab.cli.arguments import seconds
from gpulab.cli.errors import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_TERMINATED,
    EXIT_UNAVAILABLE,
)
from gpulab.cli.output import say
from gpulab.cli.worker_client import REQUEST_LIMIT, read_line

REQUEST_WAIT_S = 10.0
"""How long a connected client may take to send its request."""


def add_parser(commands: Any) -> None:
    """Register `worker` on the subcommand parsers."""
    parser = commands.add_parser(
        "worker", help="serve `gpulab run --worker SOCKET`, the device kept open between graphs"
    )
    parser.add_argument(
        "--socket",
        required=True,
        metavar="SOCKET",
        help="the Unix socket to serve on (made mode 0600; removed when the worker stops)",
    )
    parser.add_argument(
        "--idle-exit",
        type=seconds,
        metavar="SECONDS",
        help="stop after SECONDS without a run (default: serve until SIGTERM or Ctrl-C)",
    )
    parser.set_defaults(handler=main)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _listen(path: str) -> socket.socket:
    """A listening socket at `path`, mode 0600. A stale socket file is replaced; ValueError
    when a worker answers there already or the path is something else."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(mode):
            raise ValueError(f"--socket {path}: exists and is not a socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(path) == 0:
                raise ValueError(f"--socket {path}: a worker already serves it")
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound and listening under a name of its own first, then renamed into place: a client
    # that finds the socket file (a job script waiting for it) is never refused.
    pending = f"{path}.new"
    bound = False
    umask = os.umask(0o177)
    try:
        if _is_socket(pending):  # left by a worker that died starting
            os.unlink(pending)
        listener.bind(pending)
        bound = True
        listener.listen(16)
        os.rename(pending, path)
    except OSError as exc:
        listener.close()
        if bound:
            with contextlib.suppress(OSError):
                os.unlink(pending)
        raise ValueError(f"--socket {path}: cannot serve there ({exc.strerror or exc})") from None
    finally:
        os.umask(umask)
    return listener


def _peer_uid(connection: socket.socket) -> int:
    credentials = connection.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
    )
    _, uid, _ = struct.unpack("3i", credentials)
    return int(uid)


@contextlib.contextmanager
def _client_streams(fds: list[int]) -> Iterator[None]:
    """The client's stdout and stderr as this process's sys.stdout and sys.stderr, for one
    run (closed after it)."""
    out = open(fds[0], "w", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
    err = open(fds[1], "w", encoding="utf-8", errors="backslashreplace", buffering=1)  # noqa: SIM115
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield
    finally:
        for stream in (out, err):
            with contextlib.suppress(OSError, ValueError):
                stream.close()


def _run(argv: list[str], cwd: str) -> int:
    """One client's command line in its directory, as `gpulab` would run it (the worker's
    Runners kept)."""
    from gpulab.cli.main import parse_command, run_command  # noqa: PLC0415 - main imports us

    try:
        os.chdir(cwd)
    except OSError as exc:
        say(f"the worker cannot work in this directory ({exc.strerror or exc}): {cwd}")
        return EXIT_UNAVAILABLE
    try:
        args = parse_command(argv)
    except SystemExit as exc:  # argparse said why on the client's stderr (or printed --help)
        return exc.code if isinstance(exc.code, int) else EXIT_INPUT
    if args.command != "run":
        say(f"the worker runs `gpulab run` only, not `gpulab {args.command}`")
        return EXIT_INPUT
    return run_command(args)


def _read_request(connection: socket.socket) -> tuple[list[str], str, list[int]] | None:
    """The client's argv, directory and stdout and stderr descriptors (None, with any
    descriptor it sent closed, when it sent no well-formed request in time)."""
    connection.settimeout(REQUEST_WAIT_S)
    fds: list[int] = []
    request = None
    try:
        data, fds, _, _ = socket.recv_fds(connection, 65536, 2)
        if data and b"\n" not in data:
            data += read_line(connection, REQUEST_LIMIT)
        fields = json.loads(data.split(b"\n", 1)[0])
        request = [str(word) for word in fields["argv"]], str(fields["cwd"]), fds
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if request is None or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return None
    connection.settimeout(None)
    return request


def _serve(connection: socket.socket) -> int | None:
    """Read one request, run it, answer its status (None: no request was read)."""
    if _peer_uid(connection) != os.getuid():
        return None
    request = _read_request(connection)
    if request is None:
        return None
    argv, cwd, fds = request
    home = os.getcwd()
    try:
        with _client_streams(fds):
            try:
                status = _run(argv, cwd)
            except Exception as exc:  # a fault of ours: its client hears of it, we serve on
                say(f"the worker failed on this run ({type(exc).__name__}: {exc}); it serves on")
                status = EXIT_RUNTIME
                # The whole story for whoever reads the worker's log; the run's Runner was
                # closed (KeptRunners keeps none that failed), so the next run starts afresh.
                traceback.print_exception(exc, file=sys.__stderr__)
    finally:
        os.chdir(home)
    with contextlib.suppress(OSError):  # a client that left (Ctrl-C) needs no answer
        connection.sendall(json.dumps({"status": status}).encode() + b"\n")
    return status


def main(args: argparse.Namespace) -> int:
    """Serve runs on args.socket until SIGTERM, Ctrl-C or --idle-exit."""
    from gpulab.cli.run import runs_kept_open  # noqa: PLC0415
    from gpulab.running.kept import KeptRunners  # noqa: PLC0415

    listener = _listen(args.socket)
    made = os.stat(args.socket).st_ino
    listener.settimeout(args.idle_exit)
    say(f"worker {os.getpid()} serving on {args.socket}")
    try:
        with KeptRunners() as kept, runs_kept_open(kept):
            while True:
                try:
                    connection, _ = listener.accept()
                except TimeoutError:
                    say(f"worker: no run for {args.idle_exit:g} s, stopping")
                    return EXIT_OK
                with connection:
                    status = _serve(connection)
                if status in {EXIT_TERMINATED, EXIT_INTERRUPTED}:
                    return status  # the signal was the worker's: the run said so to its client
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            if os.stat(args.socket).st_ino == made:  # not a later worker's
                os.unlink(args.socket)
