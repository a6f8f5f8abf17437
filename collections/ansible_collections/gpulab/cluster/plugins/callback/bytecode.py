# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Callback gpulab.cluster.bytecode: each Python module's zip carries its files' bytecode,
compiled once on the controller, so that a host's Python does not compile them for every task."""

# Ansible plugins import after DOCUMENTATION.
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = """
name: bytecode
type: aggregate
short_description: send Python modules with their bytecode, compiled once on the controller
version_added: "2.0.0"
description:
  - Ansible sends a Python module to a host in one zip with the module_utils it imports
    (AnsiballZ), and the host's Python imports them from that zip. Python cannot keep bytecode
    for a zip it imports from, so every task compiles C(ansible.module_utils.basic) and its
    imports again. That is about 70 of the 180 ms of CPU a C(stat) module run takes with Debian
    12's Python, and several times as much on a Raspberry Pi or an emulated node.
  - With this callback enabled, each module's zip also carries a C(.pyc) beside each C(.py),
    compiled by the controller's Python. A host whose Python has the same bytecode version (the
    same minor release, e.g. 3.11 on the controller and on Debian 12) imports the bytecode; any
    other Python rejects it by its magic number and compiles the source, as without the callback.
  - The bytecode is an unchecked hash-based C(.pyc) (PEP 552), valid for exactly the source it
    was compiled from, which travels in the same zip.
  - Each file's bytecode is kept in O(cache_dir), keyed by its path in the zip, its source and
    the controller's Python, so it is compiled once per controller, not once per run.
  - It works through Ansible's internal module builder (C(ansible.executor.module_common));
    where that is not what this callback knows (another ansible-core), it does nothing and says
    so at verbosity 1. It changes no result.
requirements:
  - enable in configuration (callbacks_enabled = gpulab.cluster.bytecode)
options:
  cache_dir:
    description: Where the compiled bytecode is kept (created when missing).
    type: path
    default: ~/.ansible/gpulab_bytecode
    env:
      - name: ANSIBLE_CALLBACK_BYTECODE_CACHE_DIR
    ini:
      - section: callback_bytecode
        key: cache_dir
"""

import base64
import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import io
import marshal
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible.executor import module_common
from ansible.plugins.callback import CallbackBase

# PEP 552 flags: hash-based, source not checked.
UNCHECKED_HASH = (0b01).to_bytes(4, "little")


class BytecodeCache:
    """Compiled .pyc files by (path in the zip, source, this Python), on disk."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def pyc(self, name: str, source: bytes) -> bytes | None:
        """The .pyc for source as NAME, or None where this Python cannot compile it."""
        key = hashlib.sha256(importlib.util.MAGIC_NUMBER + name.encode() + b"\0" + source)
        path = self.directory / f"{key.hexdigest()}.pyc"
        header = importlib.util.MAGIC_NUMBER + UNCHECKED_HASH + importlib.util.source_hash(source)
        with contextlib.suppress(OSError):
            cached = path.read_bytes()
            if _loads(cached, header):  # a damaged file would fail every task that imports it
                return cached
        try:
            code = compile(source, name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return None  # not for this Python: the host compiles the source, as it would anyway
        data = header + marshal.dumps(code)
        self._store(path, data)
        return data

    def _store(self, path: Path, data: bytes) -> None:
        """Write atomically: workers of several runs may compile the same file at once."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.directory, suffix=".part")
            with os.fdopen(fd, "wb") as part:
                part.write(data)
            os.replace(temp, path)
        except OSError:
            pass  # a cache that cannot be written costs a compile next time, nothing else


def _loads(pyc: bytes, header: bytes) -> bool:
    """Whether pyc is whole: the expected header and code that unmarshals."""
    if not pyc.startswith(header):
        return False
    try:
        marshal.loads(pyc[len(header) :])
    except (EOFError, ValueError, TypeError):
        return False
    return True


def with_bytecode(zip_data: bytes, cache: BytecodeCache) -> bytes:
    """The module zip (raw bytes) with a .pyc appended for each .py that has none."""
    with zipfile.ZipFile(io.BytesIO(zip_data)) as archive:  # BadZipFile where it is none
        names = set(archive.namelist())
        added = [
            (info, pyc)
            for info in archive.infolist()
            if info.filename.endswith(".py") and f"{info.filename}c" not in names
            if (pyc := cache.pyc(info.filename, archive.read(info))) is not None
        ]
    buffer = io.BytesIO(zip_data)
    with zipfile.ZipFile(buffer, mode="a") as archive:
        for info, pyc in added:
            entry = zipfile.ZipInfo(f"{info.filename}c", date_time=info.date_time)
            entry.compress_type = info.compress_type
            entry.external_attr = info.external_attr
            archive.writestr(entry, pyc)
    return buffer.getvalue()


def install(cache: BytecodeCache) -> str | None:
    """Make Ansible's module builder add the bytecode; why not, where it cannot."""
    cached_module = getattr(module_common, "_CachedModule", None)
    try:
        fields = {field.name for field in dataclasses.fields(cached_module)}
    except TypeError:
        return "this ansible-core's module builder keeps no _CachedModule dataclass"
    if "zip_data" not in fields:
        return "this ansible-core's cached modules have no zip_data"
    build: Callable[..., None] = cached_module.__init__
    if getattr(build, "gpulab_bytecode", False):
        return None  # a second instance of the callback in the same run

    @functools.wraps(build)
    def build_with_bytecode(self: Any, *, zip_data: bytes, **rest: Any) -> None:
        # A speed-up must never fail a task: a zip it cannot read goes as it was built.
        with contextlib.suppress(Exception):
            zip_data = base64.b64encode(with_bytecode(base64.b64decode(zip_data), cache))
        build(self, zip_data=zip_data, **rest)

    build_with_bytecode.gpulab_bytecode = True  # type: ignore[attr-defined]
    cached_module.__init__ = build_with_bytecode
    return None


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpulab.cluster.bytecode"
    CALLBACK_NEEDS_ENABLED = True

    def set_options(self, *args: Any, **kwargs: Any) -> None:
        super().set_options(*args, **kwargs)
        # Options are set before the first task: before any worker builds a module's zip.
        directory = Path(os.path.expanduser(self.get_option("cache_dir")))
        why_not = install(BytecodeCache(directory))
        if why_not:
            self._display.v(f"gpulab.cluster.bytecode: off: {why_not}")
