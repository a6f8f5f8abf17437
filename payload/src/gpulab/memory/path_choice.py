"""Which way a transfer to or from a mappable buffer goes: "direct" (the host writes or reads
the mapping itself) or "staged" (through the Stager's ring), per direction.

When the target buffer is mappable (integrated GPUs, lavapipe, the H200's
DEVICE_LOCAL|HOST_VISIBLE type), either way works, and which is faster is measured, not
assumed: the first such transfer in each direction of at least PROBE_BYTES times both on a
probe of that size (best of three each) and keeps the winner. Smaller ones are not worth a
probe: they go direct, except reads of uncached memory (slow from the host), which are staged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

PROBE_BYTES = 8 << 20
Ways = Mapping[str, Callable[[], None]]
"""Each way's name ("direct", "staged") and a transfer of the probe that way."""


class PathChoice:
    """The choices per direction ("upload", "download"): given (`paths`), or measured once."""

    def __init__(self, paths: Mapping[str, str] | None = None) -> None:
        self.paths: dict[str, str] = dict(paths or {})
        """Each direction's way ("upload"/"download" -> "direct" or "staged")."""
        self.measurements: dict[str, dict[str, float]] = {}
        """The probe timings (seconds) behind each measured choice."""

    def choose(
        self, direction: str, nbytes: int, *, cached: bool, ways: Callable[[int], Ways]
    ) -> str:
        """The way for a transfer of `nbytes` in `direction` to or from a mappable buffer
        (`cached`: its memory is HOST_CACHED); `ways(probe_bytes)` gives the transfers to time
        when it must be measured."""
        path = self.paths.get(direction)
        if path is not None:
            return path
        if nbytes < PROBE_BYTES:
            return "direct" if direction == "upload" or cached else "staged"
        return self.measure(direction, ways(PROBE_BYTES))

    def measure(self, direction: str, ways: Ways) -> str:
        """Time each way (best of three); keep and return the fastest."""
        timings: dict[str, float] = {}
        for name, run in ways.items():
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                run()
                best = min(best, time.perf_counter() - start)
            timings[name] = best
        self.measurements[direction] = timings
        self.paths[direction] = min(timings, key=timings.__getitem__)
        return self.paths[direction]
