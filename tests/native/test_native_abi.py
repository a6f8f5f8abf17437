"""The cdef Python uses agrees with what the C compiler sees in the headers and with what
the libraries export: struct sizes and field offsets, constants, and the function list."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from gpulab.native import _ffi

STATS_FIELDS = [
    "capacity",
    "used",
    "free",
    "largest_free_region",
    "allocation_count",
    "free_region_count",
]
SUBALLOC_CONSTANTS = [
    "GPULAB_SUBALLOC_ABI_VERSION",
    "GPULAB_SUBALLOC_OK",
    "GPULAB_SUBALLOC_INVALID_ARGUMENT",
    "GPULAB_SUBALLOC_OUT_OF_SPACE",
    "GPULAB_SUBALLOC_UNKNOWN_OFFSET",
    "GPULAB_SUBALLOC_NO_MEMORY",
    "GPULAB_SUBALLOC_INTERNAL",
]


def compiler_layout(tmp_path: Path, compiler: str, language: str) -> dict[str, int]:
    """Compiles a program against the installed headers that prints the layout it sees."""
    lines = [
        'printf("sizeof %zu\\n", sizeof(gpulab_suballoc_stats));',
        'printf("status_size %zu\\n", sizeof(gpulab_suballoc_status));',
        *(f'printf("{f} %zu\\n", offsetof(gpulab_suballoc_stats, {f}));' for f in STATS_FIELDS),
        *(f'printf("{c} %d\\n", (int){c});' for c in SUBALLOC_CONSTANTS),
        'printf("GPULAB_KERNELS_ABI_VERSION %d\\n", GPULAB_KERNELS_ABI_VERSION);',
    ]
    source = tmp_path / f"layout.{language}"
    source.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n"
        '#include "gpulab_kernels.h"\n#include "gpulab_suballoc.h"\n'
        "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n"
    )
    program = tmp_path / f"layout-{language}"
    subprocess.run(
        [compiler, "-Wall", "-Werror", "-I", str(_ffi.lib_dir()), str(source), "-o", str(program)],
        check=True,
    )
    output = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    return {key: int(value) for key, value in (line.split() for line in output.splitlines())}


def cffi_layout() -> dict[str, int]:
    suballoc = _ffi.load(_ffi.SUBALLOC)
    kernels = _ffi.load(_ffi.KERNELS)
    ffi = suballoc.ffi
    layout = {
        "sizeof": ffi.sizeof("gpulab_suballoc_stats"),
        "status_size": ffi.sizeof("gpulab_suballoc_status"),
        "GPULAB_KERNELS_ABI_VERSION": kernels.lib.GPULAB_KERNELS_ABI_VERSION,
    }
    layout.update({f: ffi.offsetof("gpulab_suballoc_stats", f) for f in STATS_FIELDS})
    layout.update({c: getattr(suballoc.lib, c) for c in SUBALLOC_CONSTANTS})
    return layout


@pytest.mark.parametrize(("compiler", "language"), [("cc", "c"), ("c++", "cpp")])
def test_struct_layout_and_constants_agree(tmp_path: Path, compiler: str, language: str) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    assert compiler_layout(tmp_path, compiler, language) == cffi_layout()


def exported_functions(library: Path) -> set[str]:
    output = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], check=True, capture_output=True, text=True
    ).stdout
    # T: plain functions; i: functions with per-CPU variants (GNU ifunc, target_clones).
    symbols = (line.split() for line in output.splitlines())
    return {fields[-1] for fields in symbols if fields[-2] in {"T", "i"}}


@pytest.mark.parametrize("spec", [_ffi.KERNELS, _ffi.SUBALLOC], ids=lambda s: s.name)
def test_cdef_declares_exactly_the_exported_functions(spec: _ffi.LibrarySpec) -> None:
    native = _ffi.load(spec)
    declared = {name for name in dir(native.lib) if name.startswith("gpulab_")}
    assert declared == exported_functions(native.path)


def test_cdef_region_is_required() -> None:
    with pytest.raises(ValueError, match="cdef-begin"):
        _ffi.cdef_of("int f(void);")
