"""Where a result JSON goes: checked before the run, streamed, and replaced atomically.

The result goes to a temporary file in the target's folder, flushed to disk and renamed over
the target, so a failed write (disk full, file size limit) leaves the previous result whole.
Only a regular file is replaced, never through a symbolic link, and never one in /proc or /sys;
`-` (and /dev/stdout) is stdout. The folder is held open by descriptor while it is checked and
written, and every step names the file relative to it, so that nobody can redirect the write
between the check and the rename: not by a link planted in a shared folder (a job folder on
NFS), nor by swapping the folder itself while the graph runs.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gpulab._shown import PATH_LIMIT, shown
from gpulab.graph import Graph, MemoryLimit, nbytes
from gpulab.graph.model import NpyFile
from gpulab.results.file_system import kernel_file_system

STDOUT = "-"
STDOUT_ALIASES = (STDOUT, "/dev/stdout")
"""Names of stdout: written to this process's own stream, no path opened."""
DATA_LIMIT = 65536
"""Outputs with more elements than this carry only their summary unless `full` is asked."""
JSON_NUMBER_BYTES = 32
"""Bytes of one number in the indented JSON: up to 24 characters, its indent and separator."""
PYTHON_NUMBER_BYTES = 32
"""Bytes of one number while written: a Python float (24) and its list slot (8)."""
OUTPUT_OVERHEAD_BYTES = 512
"""The JSON of one output besides its data: type, shape, summary."""
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class OutputRefused(ValueError):
    """The --output path cannot take the result (exit 2, found before anything runs)."""


class OutputFailed(RuntimeError):
    """Writing the result failed, or would: disk full, too large (exit 4)."""


@dataclass(frozen=True)
class OutputTarget:
    """Where a result goes: `path` None is stdout; otherwise a regular file that a rename
    replaces, in the folder that had `folder_id` (device, inode) when it was checked."""

    path: Path | None
    name: str = STDOUT
    """The path as the user gave it, for messages."""
    folder_id: tuple[int, int] | None = None

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


@contextlib.contextmanager
def _open_folder(path: Path, name: str) -> Iterator[int]:
    """The folder of `path`, open (OutputRefused when it is missing or no folder)."""
    folder = path.parent
    try:
        handle = os.open(folder, _FOLDER)
    except FileNotFoundError:
        where = _path_shown(folder.absolute())
        raise OutputRefused(f"--output {name}: the folder {where} does not exist") from None
    except NotADirectoryError:
        where = _path_shown(folder.absolute())
        raise OutputRefused(f"--output {name}: {where} is not a folder") from None
    except OSError as exc:
        raise OutputRefused(f"--output {name}: {exc.strerror or exc}") from None
    try:
        yield handle
    finally:
        os.close(handle)


def _existing(folder: int, entry: str, name: str, inputs: Iterable[Path]) -> os.stat_result | None:
    """The regular file `entry` names in the open `folder`, None if there is none yet;
    OutputRefused for anything else there: a link is not followed, a device or FIFO not
    opened, a directory or the graph's own files not replaced."""
    if entry in ("", ".", ".."):
        raise OutputRefused(f"--output {name}: is a directory")
    try:
        status = os.stat(entry, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OutputRefused(f"--output {name}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(status.st_mode):
        raise OutputRefused(
            f"--output {name}: is a symbolic link; a result is never written through one "
            "(a link planted in a shared folder could point anywhere): name the file itself"
        )
    if stat.S_ISDIR(status.st_mode):
        raise OutputRefused(f"--output {name}: is a directory")
    same = _same_file(status, inputs)
    if same is not None:
        raise OutputRefused(
            f"--output {name}: is the input {_path_shown(same)}, which it would replace"
        )
    if not stat.S_ISREG(status.st_mode):
        raise OutputRefused(
            f"--output {name}: is not a regular file (a device, FIFO or socket); a result "
            "goes into a regular file, or to stdout with `-o -`"
        )
    return status


def _check_folder(folder: int, path: Path, name: str) -> None:
    try:
        longest = os.fpathconf(folder, "PC_NAME_MAX")
    except OSError:
        longest = 255  # Linux's NAME_MAX, where the file system does not say
    if len(os.fsencode(_temporary_name(path.name))) > longest:
        raise OutputRefused(
            f"--output {name}: the name is too long for its temporary file beside it "
            f"(names here have at most {longest} bytes)"
        )
    kernel = kernel_file_system(folder)
    if kernel is not None:
        raise OutputRefused(
            f"--output {name}: is in the kernel's {kernel} file system, whose files are "
            "settings, not results"
        )
    if not os.access(".", os.W_OK | os.X_OK, dir_fd=folder):
        where = _path_shown(path.parent.absolute())
        raise OutputRefused(f"--output {name}: the folder {where} is not writable")


def output_target(output: str | None, inputs: Iterable[Path]) -> OutputTarget:
    """Check `output` before anything runs: its folder exists and is writable (and holds
    files, not kernel settings), and it names a new file or a regular one (not a link, device,
    FIFO or directory) that is none of `inputs` (the graph and its files)."""
    if output is None or output in STDOUT_ALIASES:
        return OutputTarget(None)
    name = _path_shown(output)
    if "\0" in output:
        raise OutputRefused(f"--output {name}: a path cannot hold a NUL character")
    path = Path(output)
    with _open_folder(path, name) as folder:
        _existing(folder, path.name, name, inputs)
        _check_folder(folder, path, name)
        folder_status = os.fstat(folder)
    return OutputTarget(path, name, (folder_status.st_dev, folder_status.st_ino))


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


def _free_bytes(folder: Path) -> int:
    """The bytes an unprivileged user may still write in `folder`'s file system (what
    shutil.disk_usage calls free; os.statvfs spares the run shutil's import of bz2 and lzma)."""
    usage = os.statvfs(folder)
    return usage.f_bavail * usage.f_frsize


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
    if target.path is not None:
        free = _free_bytes(target.path.absolute().parent)
        if size.file_bytes > free:
            raise OutputFailed(
                f"--output {target}: the result JSON{flag} needs about {_size(size.file_bytes)}, "
                f"only {_size(free)} are free in {_path_shown(target.path.absolute().parent)}"
            )
    return size


def prepare_output(
    output: str | None, graph_path: Path, graph: Graph, full: bool, memory: MemoryLimit
) -> OutputTarget:
    """The checked target of a run's result (OutputRefused, OutputFailed), before it runs."""
    target = output_target(output, [graph_path, *input_files(graph)])
    check_result_fits(graph, full, target, memory)
    return target


def _new_file_mode(replaced: os.stat_result | None) -> int:
    """The permission bits of the replaced file when it is this user's own (set-user-ID and
    the like dropped), else what the umask gives a new file: a file another user planted
    lends its mode to nothing."""
    if replaced is not None and replaced.st_uid == os.geteuid():
        return stat.S_IMODE(replaced.st_mode) & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _temporary_name(entry: str) -> str:
    # os.urandom, not secrets: the same bytes, without loading OpenSSL at every start-up.
    return f".{entry}.{os.urandom(8).hex()}.tmp"


def _replace(path: Path, target: OutputTarget, write: Callable[[TextIO], None]) -> None:
    entry = path.name
    with _open_folder(path, target.name) as folder:
        found = os.fstat(folder)
        if (found.st_dev, found.st_ino) != target.folder_id:
            where = _path_shown(path.parent.absolute())
            raise OutputRefused(
                f"--output {target}: the folder {where} was replaced while the graph ran; "
                "nothing was written"
            )
        replaced = _existing(folder, entry, target.name, ())
        # 64 random bits and O_EXCL: a file by this name is one this call made, so an
        # interruption at any point (SIGTERM included) removes exactly it.
        temporary = _temporary_name(entry)
        try:
            handle = os.open(temporary, _NEW_FILE, 0o600, dir_fd=folder)
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                os.fchmod(handle, _new_file_mode(replaced))
                write(stream)
                stream.flush()
                os.fsync(handle)
            os.rename(temporary, entry, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            raise
        # The rename itself reaches the disk with the folder's entry.
        with contextlib.suppress(OSError):
            os.fsync(folder)


def write_result(target: OutputTarget, write: Callable[[TextIO], None]) -> None:
    """Run `write` on the target's stream; OutputFailed (the old file kept) when it fails,
    OutputRefused when the target changed since it was checked into something refused."""
    try:
        if target.path is None:
            write(sys.stdout)
            sys.stdout.flush()
        else:
            _replace(target.path, target, write)
    except BrokenPipeError:
        raise  # the reader left early: not a failure of ours (see cli.main)
    except OSError as exc:
        kept = "" if target.path is None else "; the previous file is unchanged"
        raise OutputFailed(
            f"--output {target}: cannot write the result: {exc.strerror or exc}{kept}"
        ) from None
