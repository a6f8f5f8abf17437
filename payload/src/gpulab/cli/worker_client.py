"""`gpulab run --worker SOCKET`: the run handed to a `gpulab worker` (gpulab.cli.worker).

One connection per run over the worker's Unix socket: the request is one JSON line, the
command line as given and this directory, sent with this process's stdout and stderr
(SCM_RIGHTS), so that the worker writes the run's output and messages straight into them;
the answer is one JSON line with the exit status. Nothing here imports numpy or Vulkan: the
client's whole cost is the interpreter's start and the command line's parsing.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from gpulab.backends.errors import BackendUnavailable, ExecutionFailed

REQUEST_LIMIT = 1 << 20
"""The longest request line (bytes) a worker reads."""


def read_line(connection: socket.socket, limit: int = REQUEST_LIMIT) -> bytes:
    """Bytes up to the first newline (without it); b"" if the peer closed first."""
    data = b""
    while b"\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return b""
        data += chunk
        if len(data) > limit:
            raise ValueError(f"a line longer than {limit} bytes")
    return data.split(b"\n", 1)[0]


def run_on_worker(path: str, argv: list[str]) -> int:
    """Run the command line `argv` (a `run`) on the worker serving `path`; its exit status.
    BackendUnavailable when no worker answers there, ExecutionFailed when it stops before it
    answers."""
    request: dict[str, Any] = {"argv": argv, "cwd": os.getcwd()}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.connect(path)
        except OSError as exc:
            raise BackendUnavailable(
                f"--worker {path}: no gpulab worker answers there ({exc.strerror or exc}); "
                f"start one with `gpulab worker --socket {path}`"
            ) from None
        socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], [1, 2])
        try:
            answer = read_line(connection)
        except (OSError, ValueError) as exc:
            answer, why = b"", str(exc)
        else:
            why = "it closed the connection"
    if not answer:
        raise ExecutionFailed(f"--worker {path}: the worker stopped before it answered ({why})")
    status: int = json.loads(answer)["status"]
    return status
