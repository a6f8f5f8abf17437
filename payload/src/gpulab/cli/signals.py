"""SIGTERM unwinds a command like Ctrl-C does, instead of killing it where it stands.

Slurm's scancel, a preemption or a stopping service send SIGTERM; Python's default dies at
once, leaving a half-written result's temporary file behind. Raised as an exception instead,
every `finally` and clean-up on the way out runs; the command then exits 143 (128 + SIGTERM),
the status a shell reports for it, as Ctrl-C gives 130.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, like KeyboardInterrupt: `except Exception` in the
    code it passes through must not swallow it."""


def _stop(signum: int, frame: FrameType | None) -> None:
    # Once: a second SIGTERM must not cut the clean-up short (Slurm's SIGKILL still comes
    # after KillWait if it hangs).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block SIGTERM raises Terminated; the previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (a caller running main() on a thread)
        return
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
