"""All cffi set-up for gpulab's native libraries, in one place.

Each library ships its C header beside the shared object, and the cdef is read from that
header (between the `gpulab:cdef-begin/end` markers), so the declarations Python uses are the
ones the library was compiled against: there is no second copy of the ABI to drift. The
libraries are looked up in the package's `_lib` directory, or in `$GPULAB_NATIVE_LIB_DIR`.
Nothing is loaded at import time: `gpulab` works without them.

Parsing a cdef needs pycparser, whose import alone costs tens of milliseconds of every run's
start-up; so the parsed declarations are kept as the out-of-line module cffi emits for them,
in gpulab's cache (`ffi/` of gpulab._cache.cache_root: `$GPULAB_CACHE_DIR`), named by a
hash of the cdef text and the cffi version: a changed header gets a new module, and the next
process loads the declarations without a parser. Where the cache cannot be written, every
process parses.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cffi
from cffi import FFI

from gpulab._cache import cache_path

LIB_DIR_ENV = "GPULAB_NATIVE_LIB_DIR"
PACKAGE_LIB_DIR = Path(__file__).with_name("_lib")
HOW_TO_FIX = (
    "build the native libraries with `make native` in the gpulab repository (or reinstall "
    "gpulab where cmake and a C/C++ compiler exist), or set "
    f"{LIB_DIR_ENV} to a directory that holds them"
)
_CDEF_REGION = re.compile(r"/\* gpulab:cdef-begin \*/\n(.*?)/\* gpulab:cdef-end \*/", re.DOTALL)


class NativeUnavailable(RuntimeError):
    """A native library is missing, cannot be loaded, or does not match its header."""


@dataclass(frozen=True)
class LibrarySpec:
    """One native library: its base name and the pair that must agree on its ABI version."""

    name: str
    abi_constant: str
    abi_function: str

    @property
    def filename(self) -> str:
        return f"lib{self.name}.so"

    @property
    def header(self) -> str:
        return f"{self.name}.h"


KERNELS = LibrarySpec("gpulab_kernels", "GPULAB_KERNELS_ABI_VERSION", "gpulab_kernels_abi_version")
SUBALLOC = LibrarySpec(
    "gpulab_suballoc", "GPULAB_SUBALLOC_ABI_VERSION", "gpulab_suballoc_abi_version"
)


@dataclass(frozen=True)
class NativeLibrary:
    """A loaded library: its FFI (types), its lib object (functions, constants), its path."""

    ffi: Any
    lib: Any
    path: Path


def lib_dir() -> Path:
    """Where the libraries are looked up: `$GPULAB_NATIVE_LIB_DIR`, else the package's `_lib`."""
    override = os.environ.get(LIB_DIR_ENV)
    return Path(override) if override else PACKAGE_LIB_DIR


def declarations(cdef: str) -> Any:
    """An FFI holding `cdef`: from the module emitted for it earlier, else parsed (and
    emitted for the next process, where the cache directory can be written)."""
    key = f"{cffi.__version__}\n{cdef}".encode()
    name = f"_gpulab_ffi_{hashlib.sha256(key).hexdigest()[:20]}"
    path = cache_path("ffi", f"{name}.py")
    if path is not None and path.is_file():
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
                return module.ffi
            except Exception:  # a damaged cache file, whatever it raises: parse, replace it
                pass
    ffi = FFI()
    ffi.cdef(cdef)
    if path is not None:
        ffi.set_source(name, None, compiler_verbose=False)
        partial = path.with_name(f"{name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            ffi.emit_python_code(str(partial))
            partial.replace(path)  # atomic: a concurrent process sees all of it or nothing
        except OSError:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
    return ffi


def cdef_of(header_text: str) -> str:
    """The cffi declarations of a header: the text between its cdef markers."""
    match = _CDEF_REGION.search(header_text)
    if match is None:
        raise ValueError("no /* gpulab:cdef-begin */ ... /* gpulab:cdef-end */ region")
    return match.group(1)


def open_library(spec: LibrarySpec, directory: Path) -> NativeLibrary:
    """Loads one library from `directory`; raises NativeUnavailable saying how to fix it."""
    path, header = directory / spec.filename, directory / spec.header
    for required in (path, header):
        if not required.is_file():
            raise NativeUnavailable(f"{required} not found: {HOW_TO_FIX}")
    try:
        ffi = declarations(cdef_of(header.read_text()))
        lib = ffi.dlopen(str(path))
    except (OSError, ValueError) as error:
        raise NativeUnavailable(f"cannot load {path}: {error}: {HOW_TO_FIX}") from error
    built, declared = getattr(lib, spec.abi_function)(), getattr(lib, spec.abi_constant)
    if built != declared:
        raise NativeUnavailable(
            f"{path} has ABI version {built} but {header} declares {declared}: {HOW_TO_FIX}"
        )
    return NativeLibrary(ffi, lib, path)


@functools.cache
def load(spec: LibrarySpec) -> NativeLibrary:
    """The library, loaded once per process from lib_dir(). Failures are not cached."""
    return open_library(spec, lib_dir())
