"""A Transport that answers Slurm's commands from a script and keeps files in a dict, and a
clock that moves only when slept on."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpulab.submit import CommandResult, ConnectionLost

Answer = CommandResult | Callable[[tuple[str, ...]], CommandResult]


def ok(
    stdout: str = "", stderr: str = "", code: int = 0
) -> Callable[[tuple[str, ...]], CommandResult]:
    """An answer with this output and exit status."""
    return lambda argv: CommandResult(argv, code, stdout, stderr)


def dropped(reason: str = "Socket exception: Connection reset by peer (104)") -> Answer:
    """The connection failing while the command runs, as SshTransport reports it."""

    def answer(argv: tuple[str, ...]) -> CommandResult:
        raise ConnectionLost(f"fake-controller: {argv[0]} failed over SSH: {reason}")

    return answer


class FakeClock:
    """time.monotonic and time.sleep for code that waits: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeTransport:
    """Records every argv; answers each program with the next of its queued answers (the
    last one repeats); files live in `files`, keyed by path."""

    where = "fake-controller"

    def __init__(self, answers: dict[str, list[Answer]] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[tuple[str, ...]] = []
        self.files: dict[str, bytes] = {}
        self.closed = False

    def run(self, argv: Sequence[str]) -> CommandResult:
        call = tuple(argv)
        self.calls.append(call)
        queue = self.answers.get(call[0])
        if not queue:
            raise AssertionError(f"unexpected command {call}")
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return answer if isinstance(answer, CommandResult) else answer(call)

    def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = data

    def read_file(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    def close(self) -> None:
        self.closed = True

    def programs(self) -> list[str]:
        """The programs run, in order."""
        return [call[0] for call in self.calls]
