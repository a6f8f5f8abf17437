"""The graph a command works on, loaded for the rest of the process."""

from __future__ import annotations

import gc

from gpulab.graph import Graph, MemoryLimit, load_graph
from gpulab.graph.load import cycle_collector_paused


def load_for_process(path: str, limit: MemoryLimit | None = None) -> Graph:
    """load_graph's graph, frozen out of the cycle collector's walks (gc.freeze): it lives
    until the process ends, and the first collection after loading would walk all its
    objects (half a second for 10^6 nodes) to find nothing to free."""
    with cycle_collector_paused():
        graph = load_graph(path, limit=limit)
        gc.freeze()
    return graph
