"""running/runner.py names no backend: what differs between backends is the executors' to say
(backends/base.py's interface) or the choice's (backends/select.py), never the runner's."""

from __future__ import annotations

import re
from pathlib import Path

from gpulab.backends.names import BACKEND_NAMES

RUNNER = Path(__file__).resolve().parents[2] / "payload/src/gpulab/running/runner.py"


def test_the_runner_contains_no_backend_name() -> None:
    found = [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(RUNNER.read_text().splitlines(), 1)
        for name in BACKEND_NAMES
        if re.search(rf"\b{re.escape(name)}\b", line, re.IGNORECASE)
    ]
    assert BACKEND_NAMES and found == []
