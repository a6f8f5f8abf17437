"""Progress of a long measurement on stderr: a bar redrawn in place (`\\r`) on a terminal, one
plain line per step elsewhere (a Slurm log, a pipe), where `\\r` would pile up in the file."""

from __future__ import annotations

import sys
from typing import TextIO

BAR_WIDTH = 30


class Progress:
    """Counts steps towards total and shows each one on stream (default: stderr)."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.terminal = self.stream.isatty()

    def step(self, label: str) -> None:
        """One more step, about to do `label`."""
        self.done += 1
        if self.terminal:
            filled = BAR_WIDTH * self.done // self.total
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} {label:<32}")
        else:
            self.stream.write(f"gpulab: [{self.done}/{self.total}] {label}\n")
        self.stream.flush()

    def finish(self) -> None:
        """End the bar's line on a terminal (plain lines are already ended)."""
        if self.terminal:
            self.stream.write("\n")
            self.stream.flush()
