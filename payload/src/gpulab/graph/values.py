"""Materializing graph inputs as float32 numpy arrays (scalars as 0-d arrays)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpulab.graph.model import Data, Fill, GraphInput, Linspace, NpyFile, Random

FloatArray = npt.NDArray[np.float32]


def materialize(spec: GraphInput) -> FloatArray:
    """The value of one input, generated or read now; its shape is `spec.shape`."""
    source = spec.source
    if isinstance(source, Random):
        generated = np.random.default_rng(source.seed).uniform(source.low, source.high, spec.shape)
        return generated.astype(np.float32)
    if isinstance(source, Fill):
        return np.full(spec.shape, source.value, dtype=np.float32)
    if isinstance(source, Linspace):
        return np.linspace(source.start, source.stop, spec.shape[0]).astype(np.float32)
    if isinstance(source, NpyFile):
        return np.ascontiguousarray(np.load(source.path, allow_pickle=False), dtype=np.float32)
    if isinstance(source, Data):
        return np.asarray(source.values, dtype=np.float32).reshape(spec.shape)
    raise TypeError(f"unknown source {source!r}")
