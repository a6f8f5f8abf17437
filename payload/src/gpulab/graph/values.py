"""Materializing graph inputs as float32 numpy arrays (scalars as 0-d arrays)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpulab.graph.model import Data, Fill, GraphInput, Linspace, NpyFile, Random

FloatArray = npt.NDArray[np.float32]
RANDOM_CHUNK = 1 << 20
"""Random values are drawn this many at a time: the float64 draws of a whole large input
would need twice its float32 size again (the stream is the same either way)."""


def _uniform(source: Random, shape: tuple[int, ...]) -> FloatArray:
    generator = np.random.default_rng(source.seed)
    values = np.empty(shape, dtype=np.float32)
    flat = values.reshape(-1)
    for start in range(0, flat.size, RANDOM_CHUNK):
        stop = min(start + RANDOM_CHUNK, flat.size)
        flat[start:stop] = generator.uniform(source.low, source.high, stop - start)
    return values


def materialize(spec: GraphInput) -> FloatArray:
    """The value of one input, generated or read now; its shape is `spec.shape`."""
    source = spec.source
    if isinstance(source, Random):
        return _uniform(source, spec.shape)
    if isinstance(source, Fill):
        return np.full(spec.shape, source.value, dtype=np.float32)
    if isinstance(source, Linspace):
        return np.linspace(source.start, source.stop, spec.shape[0]).astype(np.float32)
    if isinstance(source, NpyFile):
        return np.ascontiguousarray(np.load(source.path, allow_pickle=False), dtype=np.float32)
    if isinstance(source, Data):
        return np.asarray(source.values, dtype=np.float32).reshape(spec.shape)
    raise TypeError(f"unknown source {source!r}")
