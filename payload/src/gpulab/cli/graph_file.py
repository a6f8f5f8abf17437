"""The graph a command works on, loaded for the rest of the command."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from gpulab.graph import Graph, MemoryLimit, load_graph
from gpulab.graph.load import cycle_collector_paused


def load_for_command(
    path: str, limit: MemoryLimit | None = None, *, check_values: bool = True
) -> Graph:
    """load_graph's graph (`check_values` as there), frozen out of the cycle collector's
    walks (gc.freeze) until the
    command ends (collector_handed_back): it lives that long, and each collection that
    walked its objects (half a second for 10^6 nodes) would find nothing to free.
    Not where the program froze objects of its own: gc.unfreeze() cannot tell whose they
    are, and handing ours back would thaw theirs."""
    with cycle_collector_paused():
        graph = load_graph(path, limit=limit, check_values=check_values)
        if gc.get_freeze_count() == 0:
            gc.freeze()
    return graph


@contextlib.contextmanager
def collector_handed_back() -> Iterator[None]:
    """Around a command: what load_for_command froze goes back to the collector when the
    command ends, so that a program calling main() many times (the tests) keeps a collector
    that sees its garbage."""
    frozen_before = gc.get_freeze_count()
    try:
        yield
    finally:
        if frozen_before == 0 and gc.get_freeze_count() > 0:
            gc.unfreeze()
