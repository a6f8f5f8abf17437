"""Materializing graph inputs as float32 numpy arrays (scalars as 0-d arrays)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpulab.graph.model import Data, Fill, GraphInput, Linspace, NpyFile, Random
from gpulab.graph.npy import check_read_values

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


def read_npy_into(path: Path, out: FloatArray) -> None:
    """The float32 values of a .npy file written into `out` (C-contiguous, of its shape):
    read straight from the file where it holds C-ordered float32, cast through a memory map
    otherwise, never through an array of its own (`out` may be memory a device copies from)."""
    mapped = np.load(path, mmap_mode="r", allow_pickle=False)
    if mapped.shape != out.shape or not out.flags.c_contiguous:
        raise ValueError(f"{path}: holds shape {mapped.shape}, expected {out.shape}")
    if mapped.dtype != np.float32 or not mapped.flags.c_contiguous:
        np.copyto(out, mapped, casting="unsafe")
        return
    offset = int(mapped.offset)
    del mapped
    target = out.reshape(-1).view(np.uint8).data
    with path.open("rb") as stream:
        stream.seek(offset)
        done = 0
        while done < target.nbytes:
            count = stream.readinto(target[done:])
            if not count:
                raise ValueError(f"{path}: ends after {done} of {target.nbytes} data bytes")
            done += count


def source_name(spec: GraphInput) -> str:
    """Where an input comes from, as the result names it: random, fill, linspace, file,
    data or value (a scalar)."""
    source = spec.source
    if isinstance(source, Data):
        return "value" if spec.shape == () else "data"
    names = {Random: "random", Fill: "fill", Linspace: "linspace", NpyFile: "file"}
    return names[type(source)]


def materialize(spec: GraphInput) -> FloatArray:
    """The value of one input, generated or read now; its shape is `spec.shape`. A file's
    values are checked here when loading left them (GraphInvalid naming the input)."""
    source = spec.source
    if isinstance(source, Random):
        return _uniform(source, spec.shape)
    if isinstance(source, Fill):
        return np.full(spec.shape, source.value, dtype=np.float32)
    if isinstance(source, Linspace):
        return np.linspace(source.start, source.stop, spec.shape[0]).astype(np.float32)
    if isinstance(source, NpyFile):
        values = np.empty(spec.shape, dtype=np.float32)
        read_npy_into(source.path, values)
        check_read_values(spec.name, source, values)
        return values
    if isinstance(source, Data):
        return np.asarray(source.values, dtype=np.float32).reshape(spec.shape)
    raise TypeError(f"unknown source {source!r}")
