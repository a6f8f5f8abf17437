"""roles/payload/files/wheel_arch.py: a wheel's native libraries are read by ELF header."""

from __future__ import annotations

import importlib.util
import struct
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "payload" / "files" / "wheel_arch.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wheel_arch", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wheel_arch = load_script()


def elf(machine: int) -> bytes:
    """The first bytes of a 64-bit little-endian ELF shared object for this machine."""
    return b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HH", 3, machine) + bytes(44)


def make_wheel(path: Path, libraries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("gpulab/__init__.py", "")
        for name, content in libraries.items():
            wheel.writestr(f"gpulab/native/_lib/{name}", content)
    return path


@pytest.fixture
def aarch64_wheel(tmp_path: Path) -> Path:
    libraries = {name: elf(183) for name in wheel_arch.REQUIRED}
    return make_wheel(tmp_path / "gpulab-0.1.0-py3-none-linux_aarch64.whl", libraries)


def test_a_cross_built_wheel_passes_for_its_architecture(
    aarch64_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert wheel_arch.main(["wheel_arch.py", str(aarch64_wheel), "aarch64"]) == 0
    assert "built for aarch64" in capsys.readouterr().out


def test_a_wheel_of_another_architecture_names_each_library(
    aarch64_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert wheel_arch.main(["wheel_arch.py", str(aarch64_wheel), "x86_64"]) == 1
    out = capsys.readouterr().out.strip()
    assert out.count("\n") == 0  # one line
    assert "libgpulab_kernels.so is built for aarch64" in out
    assert "libgpulab_suballoc.so is built for aarch64" in out


def test_a_wheel_without_its_libraries_fails(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "gpulab.whl", {"libgpulab_kernels.so": elf(62)})
    assert wheel_arch.problems(str(wheel), "x86_64") == ["libgpulab_suballoc.so is missing"]


def test_a_library_that_is_not_elf_fails(tmp_path: Path) -> None:
    libraries = {name: b"not a library" for name in wheel_arch.REQUIRED}
    wheel = make_wheel(tmp_path / "gpulab.whl", libraries)
    assert all("not an ELF file" in p for p in wheel_arch.problems(str(wheel), "aarch64"))


def test_bad_input_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.whl").write_text("not a zip")
    assert wheel_arch.main(["wheel_arch.py", str(tmp_path / "broken.whl"), "aarch64"]) == 1
    assert wheel_arch.main(["wheel_arch.py", str(tmp_path / "gpulab.whl"), "mips"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert "cannot read it" in lines[0]
    assert "unknown architecture 'mips'" in lines[1]
