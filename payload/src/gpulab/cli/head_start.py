"""`gpulab run`'s Vulkan driver started from the bare command line, before any parser exists.

A run opens its device on a second thread (gpulab.running.early). Started from the run's
handler, that thread began only after the command line's modules were imported, and its own
imports (the Vulkan binding, the device choice) then shared the GIL with the main thread's
numpy, each slowing the other. The launcher (gpulab.cli.launch) calls start() first: for a
`run` on vulkan or auto it imports what the thread needs, on this thread and uncontended, then
starts the thread, whose path to the device is then the driver's own work; the handler takes
that thread (take) instead of starting one. A command line it cannot read with certainty (an
abbreviated flag, --help, a worker) leaves the start to the handler, as before.

A run on vulkan also sets OPENBLAS_NUM_THREADS=1 (unless the environment sets it) before numpy
loads: numpy's OpenBLAS otherwise starts a thread per core when it loads, and those threads
spin for a while waiting for work that a Vulkan run never gives them, competing with the
run's own threads for the cores (on a 16-core H100 host the run was 19-33 ms faster without
them in four A/B calls, docs/benchmarks.md). Such a run does no BLAS on the host; `auto`, which
may fall back to the cpu backend, and a run with --compare, which runs again on another
backend, keep numpy's threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

WORKER_ENV = "GPULAB_WORKER"
"""The socket of the `gpulab worker` a run goes to when --worker is not given (gpulab.cli.run):
defined here, where the launcher reads it before that module is imported."""
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"
"""numpy's OpenBLAS reads its thread count here when it loads."""
_VALUED = ("--backend", "--device")
_UNSURE = ("--backend", "--device", "--worker", "--help")
"""Flags whose abbreviations (argparse takes `--back`) this reader leaves to the parser."""

_started: threading.Thread | None = None


def worker_socket() -> str | None:
    """$GPULAB_WORKER: the worker socket a run goes to by default (None: none)."""
    return os.environ.get(WORKER_ENV) or None


def read_run(argv: Sequence[str]) -> tuple[str, int | None] | None:
    """(backend, device) of a `gpulab run` command line whose driver may start now; None when
    it is not such a command line or this reading might differ from the parser's."""
    if not argv or argv[0] != "run" or worker_socket() is not None:
        return None
    backend, device = "auto", None
    tokens = iter(argv[1:])
    for token in tokens:
        if token == "--":
            break
        name, has_value, value = token.partition("=")
        if name in _VALUED and not has_value:
            value = next(tokens, "")
        if name == "--backend":
            backend = value
        elif name == "--device":
            if not value.isdigit():
                return None
            device = int(value)
        elif name == "-h" or (name.startswith("--") and any(f.startswith(name) for f in _UNSURE)):
            return None
    return backend, device


def _compares(argv: Sequence[str]) -> bool:
    """Whether a run's command line may ask for --compare (as argparse reads abbreviations)."""
    for token in argv[1:]:
        if token == "--":
            break
        name = token.partition("=")[0]
        if len(name) > 2 and "--compare".startswith(name):
            return True
    return False


def start(argv: Sequence[str]) -> None:
    """Start the driver thread for the run `argv` asks for, if read_run can tell."""
    global _started  # noqa: PLW0603 - one command line per process
    wanted = read_run(argv)
    if wanted is None:
        return
    if wanted[0] == "vulkan" and not _compares(argv):
        os.environ.setdefault(BLAS_THREADS_ENV, "1")
    from gpulab.running.early import start_vulkan  # noqa: PLC0415

    _started = start_vulkan(*wanted, open_ahead=True, import_first=True)


def take() -> threading.Thread | None:
    """The thread start() started (once; None if it started none): the run's to finish."""
    global _started
    thread, _started = _started, None
    return thread
