"""Where a result JSON goes: checked before the run, streamed, and replaced atomically.

A regular file is written to a temporary file in its folder, flushed to disk and renamed over
the target, so a failed write (disk full, file size limit) leaves the previous result whole.
A device or FIFO (`/dev/null`, `/dev/full`) is written in place; `-` is stdout.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gpulab._shown import PATH_LIMIT, shown
from gpulab.graph import Graph, MemoryLimit, nbytes
from gpulab.graph.model import NpyFile

STDOUT = "-"
DATA_LIMIT = 65536
"""Outputs with more elements than this carry only their summary unless `full` is asked."""
JSON_NUMBER_BYTES = 32
"""Bytes of one number in the indented JSON: up to 24 characters, its indent and separator."""
PYTHON_NUMBER_BYTES = 32
"""Bytes of one number while written: a Python float (24) and its list slot (8)."""
OUTPUT_OVERHEAD_BYTES = 512
"""The JSON of one output besides its data: type, shape, summary."""


class OutputRefused(ValueError):
    """The --output path cannot take the result (exit 2, found before anything runs)."""


class OutputFailed(RuntimeError):
    """Writing the result failed, or would: disk full, too large (exit 4)."""


@dataclass(frozen=True)
class OutputTarget:
    """Where a result goes: `path` None is stdout; `in_place` writes a device or FIFO directly."""

    path: Path | None
    in_place: bool = False
    name: str = STDOUT
    """The path as the user gave it, for messages."""

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ResultSize:
    """Estimated bytes of a result JSON on disk, and of memory to write it."""

    file_bytes: int
    memory_bytes: int


def _size(count: int) -> str:
    """A byte count as people read it: 100 bytes, 2.5 KiB, 32.0 MiB, 1.5 GiB."""
    if count < 1 << 10:
        return f"{count} bytes"
    for unit, shift in (("KiB", 10), ("MiB", 20)):
        if count < 1 << (shift + 10):
            return f"{count / (1 << shift):.1f} {unit}"
    return f"{count / (1 << 30):.1f} GiB"


def _same_file(status: os.stat_result, others: Iterable[Path]) -> Path | None:
    for other in others:
        with contextlib.suppress(OSError):
            found = other.stat()
            if (found.st_dev, found.st_ino) == (status.st_dev, status.st_ino):
                return other
    return None


def _path_shown(path: str | Path) -> str:
    return shown(str(path), quote=False, limit=PATH_LIMIT)


def input_files(graph: Graph) -> list[Path]:
    """The .npy files a graph reads."""
    return [spec.source.path for spec in graph.inputs.values() if isinstance(spec.source, NpyFile)]


def output_target(output: str | None, inputs: Iterable[Path]) -> OutputTarget:
    """Check `output` before anything runs: its folder exists and is writable, it is not a
    directory, and it is none of `inputs` (the graph and its files), which it would replace."""
    if output is None or output == STDOUT:
        return OutputTarget(None)
    path, name = Path(output), _path_shown(output)
    try:
        status: os.stat_result | None = path.stat()
    except FileNotFoundError:
        status = None
    except NotADirectoryError:
        folder = path.absolute().parent
        raise OutputRefused(f"--output {name}: {_path_shown(folder)} is not a folder") from None
    except OSError as exc:
        raise OutputRefused(f"--output {name}: {exc.strerror or exc}") from None
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            raise OutputRefused(f"--output {name}: is a directory")
        same = _same_file(status, inputs)
        if same is not None:
            raise OutputRefused(
                f"--output {name}: is the input {_path_shown(same)}, which it would replace"
            )
        if not stat.S_ISREG(status.st_mode):
            return OutputTarget(path, in_place=True, name=name)
    # A symbolic link stays: the file it names is replaced. /dev/stdout redirected to a file
    # is written in place (the rename would replace the link in /dev).
    resolved = Path(os.path.realpath(path))
    if resolved.parts[1:2] in (("dev",), ("proc",)) or path.absolute().parts[1:2] == ("dev",):
        return OutputTarget(path, in_place=True, name=name)
    folder = resolved.parent
    if not folder.is_dir():
        raise OutputRefused(f"--output {name}: the folder {_path_shown(folder)} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputRefused(f"--output {name}: the folder {_path_shown(folder)} is not writable")
    return OutputTarget(resolved, name=name)


def result_size(graph: Graph, full: bool) -> ResultSize:
    """What writing the result of `graph` takes: outputs with their data (all with `full`, else
    those of at most DATA_LIMIT elements) at JSON_NUMBER_BYTES a number on disk; in memory the
    largest of them as Python numbers (outputs are written one at a time)."""
    data = [0]
    for name in graph.outputs:
        shape = graph.shape(name)
        elements = math.prod(shape)
        if shape and (elements <= DATA_LIMIT or full):
            data.append(elements)
    file_bytes = sum(data) * JSON_NUMBER_BYTES + OUTPUT_OVERHEAD_BYTES * (len(graph.outputs) + 4)
    return ResultSize(file_bytes, max(data) * PYTHON_NUMBER_BYTES)


def check_result_fits(
    graph: Graph, full: bool, target: OutputTarget, memory: MemoryLimit
) -> ResultSize:
    """OutputFailed when the result JSON would not fit: its largest output as Python numbers
    besides the outputs themselves in `memory`, or the file in its folder's free space."""
    size = result_size(graph, full)
    held = sum(nbytes(graph.shape(name)) for name in graph.outputs)
    flag = " (--full)" if full else ""
    if size.memory_bytes + held > memory.bytes:
        raise OutputFailed(
            f"the result JSON{flag} needs about {_size(size.memory_bytes)} of memory to write "
            f"besides the outputs' {_size(held)}, only {_size(memory.bytes)} of {memory.what} "
            "exist"
        )
    if target.path is not None and not target.in_place:
        free = shutil.disk_usage(target.path.absolute().parent).free
        if size.file_bytes > free:
            raise OutputFailed(
                f"--output {target}: the result JSON{flag} needs about {_size(size.file_bytes)}, "
                f"only {_size(free)} are free in {target.path.absolute().parent}"
            )
    return size


def prepare_output(
    output: str | None, graph_path: Path, graph: Graph, full: bool, memory: MemoryLimit
) -> OutputTarget:
    """The checked target of a run's result (OutputRefused, OutputFailed), before it runs."""
    target = output_target(output, [graph_path, *input_files(graph)])
    check_result_fits(graph, full, target, memory)
    return target


def _new_file_mode(path: Path) -> int:
    """The mode the replaced file had, else what the umask gives a new file."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(path.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _replace(path: Path, write: Callable[[TextIO], None]) -> None:
    folder = path.absolute().parent
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, _new_file_mode(path))
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    # The rename itself reaches the disk with the folder's entry.
    with contextlib.suppress(OSError):
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def write_result(target: OutputTarget, write: Callable[[TextIO], None]) -> None:
    """Run `write` on the target's stream; OutputFailed (the old file kept) when it fails."""
    try:
        if target.path is None:
            write(sys.stdout)
            sys.stdout.flush()
        elif target.in_place:
            with target.path.open("w", encoding="utf-8") as stream:
                write(stream)
        else:
            _replace(target.path, write)
    except BrokenPipeError:
        raise  # the reader left early: not a failure of ours (see cli.main)
    except OSError as exc:
        kept = "" if target.path is None or target.in_place else "; the previous file is unchanged"
        raise OutputFailed(
            f"--output {target}: cannot write the result: {exc.strerror or exc}{kept}"
        ) from None
