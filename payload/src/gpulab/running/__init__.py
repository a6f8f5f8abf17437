"""Running a graph: the Runner schedules it, splits it into per-backend segments, makes its
inputs where they are read, moves values between the executors and returns the Result.

Names are imported on first use (PEP 562): `gpulab run` starts the Vulkan driver early
(running.early) before it loads numpy and the executors.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes

if TYPE_CHECKING:
    from gpulab.running.runner import Runner, run_graph

__all__ = ["Runner", "run_graph"]

__getattr__, __dir__ = lazy_attributes(
    __name__, {"Runner": f"{__name__}.runner", "run_graph": f"{__name__}.runner"}
)
