"""What making a graph's compute pipelines costs a cold process: each vkCreateComputePipelines
of one run of GRAPH on Vulkan, in ms, and the run's record_ms.

    PYTHONPATH=payload/src python3 payload/benchmarks/pipeline_creation.py GRAPH.json

Run it with an empty GPULAB_CACHE_DIR (no saved pipelines: the driver compiles, from its own
disk cache where it has one; `__GL_SHADER_DISK_CACHE=0` turns NVIDIA's off), then again with the
same folder (seeded from what the first run saved, kernels/saved_pipelines.py).
docs/benchmarks/saved-pipelines-h100.txt has the H100's (there from the probe this replaced,
which seeded the cache by hand).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from gpulab import Runner, load_graph
from gpulab.vk import ComputePipeline


def main() -> None:
    spent: list[float] = []
    make = ComputePipeline.__init__

    def timed(self: ComputePipeline, *args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        make(self, *args, **kwargs)
        spent.append((time.perf_counter() - start) * 1e3)

    ComputePipeline.__init__ = timed  # type: ignore[method-assign]
    with Runner("vulkan") as runner:
        result = runner.run(load_graph(sys.argv[1]))
    shown = {"each_ms": [round(ms, 2) for ms in spent], "total_ms": round(sum(spent), 2)}
    print(json.dumps({**shown, "record_ms": round(result.phases.get("record_ms", 0.0), 2)}))


if __name__ == "__main__":
    main()
