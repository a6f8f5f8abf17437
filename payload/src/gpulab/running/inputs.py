"""Where each graph input is made: on the Vulkan device that reads it, or on the host.

A random, fill or linspace input that only Vulkan segments read is generated on the device
(bit for bit the host's values, see gpulab.kernels.generate) unless the device cannot; a
.npy file that only Vulkan segments read is read straight into pinned host memory there.
Every other input is materialized on the host, once, by the runner. The result reports each
input under `inputs`, with the reason when one that could have been made on the device was
not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpulab.backends.base import Segment
from gpulab.graph import Graph, GraphInput
from gpulab.graph.model import Fill, Linspace, NpyFile, Random
from gpulab.graph.values import source_name
from gpulab.kernels import Constant, Pattern, Ramp, Uniform


def pattern_of(spec: GraphInput) -> Pattern | None:
    """The device pattern of a generated input (None for data, values and files)."""
    source = spec.source
    if isinstance(source, Random):
        return Uniform.from_seed(source.seed, source.low, source.high)
    if isinstance(source, Linspace):
        return Ramp(source.start, source.stop)
    if isinstance(source, Fill):
        return Constant(source.value)
    return None


@dataclass
class InputPlan:
    """The inputs the Vulkan executor makes itself (each input's pattern, worked out once, or
    its file), and the result's `inputs` report."""

    on_vulkan: dict[str, Pattern | NpyFile] = field(default_factory=dict)
    report: dict[str, dict[str, str]] = field(default_factory=dict)

    def made_by(self, segment: Segment) -> dict[str, Pattern | NpyFile]:
        """The inputs a Vulkan segment makes rather than receives."""
        return {name: self.on_vulkan[name] for name in segment.reads if name in self.on_vulkan}


def plan_inputs(
    graph: Graph,
    segments: Sequence[tuple[str, Segment]],
    cannot_generate: Callable[[str, Pattern, int], str | None],
) -> InputPlan:
    """Decide where each input that the run needs is made. `cannot_generate(backend,
    pattern, count)` says why `backend`'s executor (the Vulkan one) cannot generate an input
    (None: it can); asked only about inputs that only its segments read."""
    readers: dict[str, set[str]] = {}
    for where, segment in segments:
        for name in segment.reads:
            if name in graph.inputs:
                readers.setdefault(name, set()).add(where)
    plan = InputPlan()
    for name, spec in graph.inputs.items():
        if name not in readers and name not in graph.output_set:
            continue  # never read: never made
        source = source_name(spec)
        entry = {"source": source, "made_on": "host"}
        backends = readers.get(name, set())
        pattern = pattern_of(spec) if "vulkan" in backends else None
        if pattern is not None:
            others = sorted(backends - {"vulkan"})
            reason = (
                f"also read on {' and '.join(others)}"
                if others
                else cannot_generate("vulkan", pattern, math.prod(spec.shape))
            )
            if reason is None:
                entry["made_on"] = "device"
                plan.on_vulkan[name] = pattern
            else:
                entry["reason"] = reason
        elif (
            backends == {"vulkan"}
            and isinstance(spec.source, NpyFile)
            and name not in graph.output_set
        ):
            plan.on_vulkan[name] = spec.source  # read into pinned memory by the executor
        plan.report[name] = entry
    return plan
