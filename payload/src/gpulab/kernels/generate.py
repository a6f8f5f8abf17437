"""Inputs made on the device, bit for bit what numpy makes on the host.

`Uniform` is numpy's default_rng(seed).uniform(low, high, n) as float32 (PCG64: the stream
of each dispatch starts at its first element, jumped to on the host, and each invocation
jumps to its own), `Ramp` is np.linspace(start, stop, n) as float32, `Constant` np.full.
Uniform and Ramp compute in double and round to float32 in integers (uniform.comp,
linspace.comp), so they need the shaderInt64 and shaderFloat64 features; Constant writes
the float32's bits (fill_bits.comp) on any device.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from gpulab.kernels._recording import NO_ELEMENT, Recording
from gpulab.kernels.array import DeviceArray
from gpulab.kernels.pcg64 import advance, seeded

NEEDED_FEATURES = ("shaderInt64", "shaderFloat64")
TINY = 2.0**-900
"""Nonzero parameters below this in size could make subnormal doubles on the device, which
Vulkan lets a device flush to zero: such inputs are made on the host."""
ELEMENTS_PER_INVOCATION = 64
"""Uniform: each invocation's jump-ahead is paid back over this many elements at least."""


@dataclass(frozen=True)
class Uniform:
    """numpy's uniform draws from a PCG64 state (128-bit state and increment)."""

    state: int
    increment: int
    low: float
    high: float

    @classmethod
    def from_seed(cls, seed: int, low: float, high: float) -> Uniform:
        """The stream of np.random.default_rng(seed)."""
        state, increment = seeded(seed)
        return cls(state, increment, float(low), float(high))


@dataclass(frozen=True)
class Ramp:
    """np.linspace(start, stop, n), n being the size of the array written."""

    start: float
    stop: float


@dataclass(frozen=True)
class Constant:
    """np.full(n, value)."""

    value: float


Pattern = Uniform | Ramp | Constant


def _ramp_step(ramp: Ramp, count: int) -> float:
    """What numpy multiplies each index by: (stop - start) / (count - 1), or the difference
    itself for one element (numpy computes 0 * delta there)."""
    delta = ramp.stop - ramp.start
    return delta / (count - 1) if count > 1 else delta


def unsupported(pattern: Pattern, features: tuple[str, ...], count: int) -> str | None:
    """Why the device cannot make `pattern` over `count` elements bit for bit (None: it can)."""
    if isinstance(pattern, Constant):
        return None
    missing = [name for name in NEEDED_FEATURES if name not in features]
    if missing:
        return f"the device lacks {' and '.join(missing)} (needed to match numpy bit for bit)"
    if isinstance(pattern, Uniform):
        numbers = {
            "low": pattern.low,
            "high": pattern.high,
            "high - low": pattern.high - pattern.low,
        }
    else:
        step = _ramp_step(pattern, count)
        if step == 0 and pattern.stop != pattern.start:
            return "the linspace step underflows to 0 (numpy divides each index instead)"
        numbers = {"start": pattern.start, "stop": pattern.stop, "the step": step}
    for name, value in numbers.items():
        if value != 0 and abs(value) < TINY:
            return f"{name} is below 2^-900 in size: subnormal doubles, which a device may flush"
    return None


def _float32_bits(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


def record_pattern(recording: Recording, pattern: Pattern, out: DeviceArray) -> None:
    """Append the dispatches that write `pattern` into `out` (then a compute barrier)."""
    geometry = recording.geometry
    chunk = geometry.binding_elements
    total = out.size
    for first in range(0, total, chunk):
        count = min(chunk, total - first)
        groups = recording.groups(count)
        if isinstance(pattern, Uniform):
            shader = "uniform"
            wanted = math.ceil(count / (geometry.workgroup_size * ELEMENTS_PER_INVOCATION))
            groups = max(1, min(wanted, geometry.max_groups))
            state = advance(pattern.state, pattern.increment, first)
            push = struct.pack(
                "<QQQQddI",
                state & 0xFFFFFFFFFFFFFFFF,
                state >> 64,
                pattern.increment & 0xFFFFFFFFFFFFFFFF,
                pattern.increment >> 64,
                pattern.low,
                pattern.high - pattern.low,
                count,
            )
        elif isinstance(pattern, Ramp):
            shader = "linspace"
            last = total - 1 - first if total > 1 and first <= total - 1 < first + count else None
            push = struct.pack(
                "<ddQIII",
                pattern.start,
                _ramp_step(pattern, total),
                first,
                count,
                NO_ELEMENT if last is None else last,
                _float32_bits(pattern.stop),
            )
        else:
            shader = "fill_bits"
            push = struct.pack("<II", count, _float32_bits(pattern.value))
        recording.dispatch(
            shader,
            {0: geometry.workgroup_size},
            [out.elements(first, count)],
            push,
            (groups, 1, 1),
        )
    recording.barrier()
