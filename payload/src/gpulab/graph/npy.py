"""A .npy file's layout, read from its header, and the check that its values are float32's.

`npy_layout` finds where the data starts, its dtype, shape and order (numpy.lib.format's
header readers, no memory map), so that a backend can move the data bytes as they are when
they already are the float32 values in C order (`NpyLayout.why_not_streamed`). `bad_value`
is the one check of the values (finite, within float32's range) and its message, used when
the graph is validated (every command, `gpulab run` included: it refuses what `gpulab
validate` refuses, with the same lines) and, where a caller loads with
`load_graph(check_values=False)`, on each chunk as the run reads it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
from numpy.lib import format as npy_format

from gpulab.graph._json import FLOAT32_MAX
from gpulab.graph.model import NpyFile
from gpulab.graph.problems import GraphInvalid, Problem

FLOAT32 = np.dtype(np.float32)
CHECK_CHUNK = 1 << 20
"""Elements of a memory-mapped .npy file checked at a time."""
CHECK_THREADS_FROM = 8 * CHECK_CHUNK
"""Files of at least this many elements are checked on several threads."""
MAX_CHECK_THREADS = 16


@dataclass(frozen=True)
class NpyLayout:
    """Where a .npy file's data starts (`offset`, bytes), its dtype, shape and order."""

    offset: int
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    fortran_order: bool

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def why_not_streamed(self) -> str | None:
        """Why the data bytes are not the float32 values in C order, which is what a device
        buffer holds (None: they are, and may be copied as they are)."""
        if self.dtype != FLOAT32:
            # A conversion (another type, or float32 of the other byte order) is numpy's
            # cast through a memory map, done on the host.
            return f"holds {self.dtype.str}, converted to float32 on the host"
        if self.fortran_order and len(self.shape) > 1:
            return "is in Fortran order, transposed on the host"
        return None


def npy_layout(stream: BinaryIO) -> NpyLayout:
    """The layout of the .npy file open in `stream` (read from its start); ValueError when
    it is no .npy file numpy's header readers accept (format versions 1.0 and 2.0, the
    ones np.save writes for plain dtypes; 3.0 only adds UTF-8 field names)."""
    stream.seek(0)
    version = npy_format.read_magic(stream)
    if version == (1, 0):
        shape, fortran_order, dtype = npy_format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran_order, dtype = npy_format.read_array_header_2_0(stream)
    else:
        raise ValueError(f"a .npy format version {version[0]}.{version[1]} header")
    return NpyLayout(stream.tell(), np.dtype(dtype), tuple(shape), bool(fortran_order))


def bad_value(values: npt.NDArray[Any], start: int, shape: tuple[int, ...]) -> str | None:
    """Why the flat `values`, elements `start`... of an array of `shape` (C order), cannot
    all be float32 (NaN, infinity or beyond float32's range), or None. Integers always can.
    The common case, none, costs one pass: isfinite for float32 and narrower (every finite
    one fits; about twice as fast as min and max), else min and max (NaN compares False);
    only then the element is looked for."""
    if values.dtype.kind in "iu" or values.size == 0:
        return None
    if values.dtype.itemsize <= FLOAT32.itemsize:
        if np.isfinite(values).all():
            return None
    elif values.min() >= -FLOAT32_MAX and values.max() <= FLOAT32_MAX:
        return None
    bad = ~np.isfinite(values) | (np.abs(values) > FLOAT32_MAX)
    offset = int(np.argmax(bad))
    index = [int(i) for i in np.unravel_index(start + offset, shape)]
    return (
        f"element {index} is {float(values[offset])!r}; values must be finite and fit "
        f"float32 (at most {FLOAT32_MAX:.8g} in size)"
    )


def first_bad_value(array: npt.NDArray[Any], threads: int | None = None) -> str | None:
    """bad_value of a whole array, read in chunks (through a memory map a large file is
    never whole in memory), on `threads` host threads from CHECK_THREADS_FROM elements on
    (default: one per core, up to MAX_CHECK_THREADS; numpy checks without the GIL). Other
    numeric types than float32 are cast by rounding to the nearest float32, so their values
    are checked before the cast."""
    flat = array.reshape(-1)
    starts = range(0, flat.size, CHECK_CHUNK)

    def check(start: int) -> str | None:
        return bad_value(np.asarray(flat[start : start + CHECK_CHUNK]), start, array.shape)

    workers = threads or min(MAX_CHECK_THREADS, os.cpu_count() or 1)
    if workers == 1 or flat.size < CHECK_THREADS_FROM:
        return next((problem for problem in map(check, starts) if problem), None)
    with ThreadPoolExecutor(workers, thread_name_prefix="gpulab-check") as pool:
        # In order, so the problem reported is the first element's.
        return next((problem for problem in pool.map(check, starts) if problem), None)


def bad_values_problem(name: str, source: NpyFile) -> Problem | None:
    """The problem validation finds with the values of input `name`'s file, or None (the
    check of a file no run reads, when the load left values to their reader)."""
    bad = first_bad_value(np.load(source.path, mmap_mode="r", allow_pickle=False))
    return None if bad is None else _problem(name, source, bad)


def _problem(name: str, source: NpyFile, text: str) -> Problem:
    """A problem with input `name`'s file, as validation words it."""
    return Problem(f"inputs.{name}.file", f"{source.shown_as}: {text}")


def _refuse(name: str, source: NpyFile, problem: str | None) -> None:
    if problem is not None:
        raise GraphInvalid([_problem(name, source, problem)])


def refuse_bad_values(
    name: str, source: NpyFile, values: npt.NDArray[Any], start: int, shape: tuple[int, ...]
) -> None:
    """GraphInvalid naming input `name` and its file, in validation's words, when bad_value
    finds one in `values` (the file's own float32 values, read after loading with
    check_values=False)."""
    _refuse(name, source, bad_value(values, start, shape))


def refuse_nonfinite_at(name: str, source: NpyFile, index: int, shape: tuple[int, ...]) -> None:
    """GraphInvalid in validation's words for element `index` (flat, C order) of input
    `name`'s float32 file, which a device found to be NaN or infinite where it read the file
    (gpulab.kernels' first_nonfinite): its value is read again from the file for the message."""
    with source.path.open("rb") as stream:
        layout = npy_layout(stream)
        stream.seek(layout.offset + index * layout.dtype.itemsize)
        value = np.frombuffer(stream.read(layout.dtype.itemsize), dtype=layout.dtype)
    refuse_bad_values(name, source, value, index, shape)
    # The file no longer holds it (it changed since the read): what the device saw.
    where = [int(i) for i in np.unravel_index(index, shape)]
    _refuse(name, source, f"element {where} was not finite when read (the file has changed since)")


def check_read_values(name: str, source: NpyFile, values: npt.NDArray[np.float32]) -> None:
    """After a read into float32 `values`: what validation would have refused, unless the
    load checked it already. A file of another type is checked in its own values (a
    float64 1e39 is refused as such, not as the infinity it casts to)."""
    if source.values_checked:
        return
    mapped = np.load(source.path, mmap_mode="r", allow_pickle=False)
    if mapped.dtype == FLOAT32:
        del mapped
        _refuse(name, source, first_bad_value(values))
    else:
        _refuse(name, source, first_bad_value(mapped))
