"""Running `gpulab` on a fuzzed graph and checking the contract on what comes back.

Most cases run in this process through `main()` with stdout and stderr captured the way a
terminal encodes them (stdout strict UTF-8, stderr with backslash escapes, as Python does):
any exception other than SystemExit is a bug, and so is a case that runs past its alarm.
A smaller sample runs as real subprocesses with a timeout (`subprocess_case`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from gpulab.cli import main as cli_main
from gpulab.graph import MemoryLimit
from gpulab.running import runner
from hypothesis import HealthCheck, settings

CONTRACT_CODES = {0, 2, 3, 4}
CASE_TIMEOUT_S = 20
"""A case still running after this long is a hang (the biggest fuzzed graph runs in ms)."""
RUN_MEMORY = MemoryLimit(64 << 20, "available memory (capped by the fuzz suite)")
"""In-process runs may hold this much: a fuzzed size is then small or refused, never a real
multi-gigabyte run (legitimate, but minutes of work on a shared CI machine)."""

SCRIPT = Path(sys.executable).with_name("gpulab")
GPULAB = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "gpulab"]


def examples(default: int) -> int:
    """`default` examples, or GPULAB_FUZZ_EXAMPLES times default/1000 for a longer run
    (GPULAB_FUZZ_EXAMPLES=20000 runs every fuzz test with 20x its CI count)."""
    scale = os.environ.get("GPULAB_FUZZ_EXAMPLES")
    if not scale:
        return default
    return max(1, default * int(scale) // 1000)


def fuzz_settings(default: int) -> settings:
    """CI: a fixed, derandomized set of examples; the long run draws new ones each time."""
    long_run = bool(os.environ.get("GPULAB_FUZZ_EXAMPLES"))
    return settings(
        max_examples=examples(default),
        deadline=None,
        derandomize=not long_run,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


class Hang(Exception):
    """A case ran past CASE_TIMEOUT_S."""


@contextlib.contextmanager
def alarm(seconds: int) -> Iterator[None]:
    def expired(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class Outcome:
    """What one command did: exit code, stdout and stderr as text."""

    argv: tuple[str, ...]
    code: int
    out: str
    err: str

    def describe(self) -> str:
        command = f"gpulab {' '.join(self.argv)} -> {self.code}"
        return f"{command}\nstdout: {self.out[:2000]}\nstderr: {self.err[:2000]}"


_PARSER = cli_main.build_parser()


@contextlib.contextmanager
def _one_parser() -> Iterator[None]:
    """main() with the parser built once (building it costs more than most cases: argparse
    and gettext; it is the same parser every time in one process), and runs capped at
    RUN_MEMORY."""
    build, available = cli_main.build_parser, runner.available_memory
    cli_main.build_parser = lambda only=None: _PARSER  # type: ignore[assignment]
    runner.available_memory = lambda: min(available(), RUN_MEMORY, key=lambda m: m.bytes)  # type: ignore[assignment]
    try:
        yield
    finally:
        cli_main.build_parser = build  # type: ignore[assignment]
        runner.available_memory = available  # type: ignore[assignment]


def in_process(argv: Sequence[str]) -> Outcome:
    """`gpulab ARGV` through main() in this process (argparse's exit is caught as a code)."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(
        err_bytes, encoding="utf-8", errors="backslashreplace", write_through=True
    )
    with (
        alarm(CASE_TIMEOUT_S),
        _one_parser(),
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        warnings.simplefilter("always")
        try:
            code = cli_main.main(list(argv))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    # A warning would reach a user's terminal as lines that are not gpulab's.
    assert not caught, [str(w.message) for w in caught]
    return Outcome(tuple(argv), code, out_bytes.getvalue().decode(), err_bytes.getvalue().decode())


def subprocess_case(argv: Sequence[str], env: dict[str, str] | None = None) -> Outcome:
    """`gpulab ARGV` as a real process; a timeout is a hang."""
    try:
        done = subprocess.run(
            [*GPULAB, *argv],
            capture_output=True,
            timeout=CASE_TIMEOUT_S * 2,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise Hang(f"gpulab {' '.join(argv)} still running after {exc.timeout} s") from exc
    return Outcome(
        tuple(argv),
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def check_contract(outcome: Outcome) -> None:
    """The contract's promises that hold for every input: a known exit code, no traceback,
    every failure explained on stderr in lines that start with `gpulab:` (argparse's own
    usage lines aside), and a result JSON on stdout after a successful run."""
    detail = outcome.describe()
    assert outcome.code in CONTRACT_CODES, detail
    assert "Traceback" not in outcome.err, detail
    lines = outcome.err.splitlines()
    if outcome.code != 0:
        assert lines, detail
    argparse_usage = any(line.startswith("usage:") for line in lines)
    if not argparse_usage:
        for line in lines:
            assert line.startswith("gpulab: "), detail
    if outcome.code == 0 and outcome.argv[0] == "run" and "--output" not in outcome.argv:
        document = json.loads(outcome.out)
        assert document["version"] == 1, detail
        assert isinstance(document["outputs"], dict), detail


def result_of(outcome: Outcome) -> dict[str, Any]:
    """The result JSON of a successful `gpulab run` without --output."""
    document: dict[str, Any] = json.loads(outcome.out)
    return document
