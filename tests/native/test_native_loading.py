"""Loading: a missing or broken library gives NativeUnavailable naming the path and the fix,
and nothing in gpulab needs the libraries until a native call is made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpulab._cache import CACHE_DIR_ENV
from gpulab.native import _ffi


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of parsed declarations of the test's own (a changed header adds a module)."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_missing_library_names_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(_ffi.NativeUnavailable) as caught:
        _ffi.open_library(_ffi.KERNELS, tmp_path)
    assert str(tmp_path / "libgpulab_kernels.so") in str(caught.value)
    assert "make native" in str(caught.value)


def test_unloadable_library_reports_the_loader_error(tmp_path: Path) -> None:
    (tmp_path / "libgpulab_suballoc.so").write_bytes(b"not an ELF file")
    header = _ffi.lib_dir() / "gpulab_suballoc.h"
    (tmp_path / "gpulab_suballoc.h").write_text(header.read_text())
    with pytest.raises(_ffi.NativeUnavailable, match=r"cannot load .*make native"):
        _ffi.open_library(_ffi.SUBALLOC, tmp_path)


def test_header_from_another_abi_version_is_refused(tmp_path: Path, cache: Path) -> None:
    source = _ffi.lib_dir()
    (tmp_path / "libgpulab_kernels.so").symlink_to(source / "libgpulab_kernels.so")
    header = (source / "gpulab_kernels.h").read_text()
    bumped = header.replace("GPULAB_KERNELS_ABI_VERSION 1", "GPULAB_KERNELS_ABI_VERSION 2")
    (tmp_path / "gpulab_kernels.h").write_text(bumped)
    with pytest.raises(_ffi.NativeUnavailable, match=r"ABI version 1 but .* declares 2"):
        _ffi.open_library(_ffi.KERNELS, tmp_path)


def test_gpulab_imports_and_fails_clearly_without_the_libraries(tmp_path: Path) -> None:
    script = (
        "import gpulab, gpulab.native\n"
        "from gpulab.native import kernels\n"
        "try:\n"
        "    kernels.add([1.0], [2.0])\n"
        "except gpulab.native.NativeUnavailable as error:\n"
        "    print(error)\n"
    )
    env = {**os.environ, _ffi.LIB_DIR_ENV: str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert f"{tmp_path}/libgpulab_kernels.so not found" in result.stdout
    assert "make native" in result.stdout


def test_parsed_declarations_are_kept_so_the_next_process_needs_no_parser(cache: Path) -> None:
    _ffi.open_library(_ffi.SUBALLOC, _ffi.lib_dir())
    assert len(list((cache / "ffi").glob("*.py"))) == 1
    script = (
        "import sys\n"
        "from gpulab.native import _ffi\n"
        "native = _ffi.open_library(_ffi.SUBALLOC, _ffi.lib_dir())\n"
        "print(native.lib.gpulab_suballoc_abi_version(), 'pycparser' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "1 False\n", "")


def test_a_damaged_or_unwritable_cache_only_costs_a_parse(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ffi.open_library(_ffi.SUBALLOC, _ffi.lib_dir())
    (kept,) = (cache / "ffi").glob("*.py")
    kept.write_text("ffi = undefined_name\n")
    assert _ffi.open_library(_ffi.SUBALLOC, _ffi.lib_dir()).lib.gpulab_suballoc_abi_version() == 1
    assert "_cffi_backend" in kept.read_text()  # replaced by a good one
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocked))
    assert _ffi.open_library(_ffi.SUBALLOC, _ffi.lib_dir()).lib.gpulab_suballoc_abi_version() == 1
