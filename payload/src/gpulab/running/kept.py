"""Runners kept open between graphs, for a process that runs many (`gpulab worker`).

A Runner keeps its executors, and so the Vulkan device, its memory pools, pipelines and
staging ring, until it is closed; a `gpulab run` process closes it when its one graph is done.
KeptRunners hands out one Runner per set of options (backend, device, memory budget, fusion)
and keeps it for the next graph with the same options, unless the run left it in doubt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import NamedTuple

from gpulab._closeable import Closeable
from gpulab.graph import GraphInvalid
from gpulab.running.runner import Runner


class RunnerOptions(NamedTuple):
    backend: str
    device: int | None
    memory_budget: int | None
    fuse: bool


class KeptRunners(Closeable):
    """One open Runner per RunnerOptions; close() closes them all."""

    def __init__(self) -> None:
        self._runners: dict[RunnerOptions, Runner] = {}

    @contextlib.contextmanager
    def runner(self, options: RunnerOptions) -> Iterator[Runner]:
        """The kept Runner for `options` (opened if there is none) for one graph. It is
        closed instead of kept when the graph fell back to another backend (the Runner stays
        on it) or failed with anything but an invalid graph (refused before it runs, or by
        the device's check of a file's values after the submission: the Runner is as it was)."""
        runner = self._runners.pop(options, None)
        if runner is None:
            runner = Runner(
                options.backend, options.device, options.memory_budget, fuse=options.fuse
            )
        keep = False
        try:
            yield runner
            keep = runner.fallback is None
        except GraphInvalid:
            keep = runner.fallback is None
            raise
        finally:
            if keep:
                self._runners[options] = runner
            else:
                runner.close()

    def close(self) -> None:
        runners, self._runners = list(self._runners.values()), {}
        for runner in runners:
            runner.close()
