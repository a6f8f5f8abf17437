"""A runner that answers each expected argv with a fixed result, recording what ran."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import CommandResult

TOOLS = ("sbatch", "scontrol", "squeue", "scancel", "sacct", "sinfo")


@dataclass
class Call:
    argv: list[str]
    stdin: str | None
    env: dict[str, str] | None


@dataclass
class FakeRunner:
    """Answers the expected commands in order; any other command fails the test."""

    script: list[tuple[list[str], CommandResult]] = field(default_factory=list)
    tools: tuple[str, ...] = TOOLS
    calls: list[Call] = field(default_factory=list)

    def expect(
        self, argv: list[str], rc: int = 0, stdout: str = "", stderr: str = ""
    ) -> FakeRunner:
        self.script.append((argv, CommandResult(tuple(argv), rc, stdout, stderr)))
        return self

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.tools else None

    def run(
        self, argv: Sequence[str], stdin: str | None = None, env: dict[str, str] | None = None
    ) -> CommandResult:
        self.calls.append(Call(list(argv), stdin, env))
        assert self.script, f"unexpected command {argv}"
        expected, result = self.script.pop(0)
        assert list(argv) == expected
        return result


class FakeClock:
    """time.monotonic and time.sleep over a counter: sleeping advances the clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
