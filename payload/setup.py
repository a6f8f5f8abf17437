"""Build hook: compiles gpulab's native libraries (payload/native, with CMake) into the
package as gpulab/native/_lib, next to their headers, for wheels and editable installs alike.
Everything else about the package is in pyproject.toml.

GPULAB_NATIVE_BUILD=0 installs without them: gpulab then works, and the `native` backend
reports NativeUnavailable with the fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

from setuptools import Command, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build import build
from setuptools.dist import Distribution
from setuptools.errors import SetupError

HERE = Path(__file__).resolve().parent
NATIVE_SOURCE = HERE / "native"
PACKAGE_LIB = Path("gpulab", "native", "_lib")


class BuildNative(Command):
    """Configures, builds and installs the CMake project into the package's _lib directory."""

    description = "compile libgpulab_kernels and libgpulab_suballoc with CMake"
    user_options: ClassVar[list[tuple[str, str | None, str]]] = []

    def initialize_options(self) -> None:
        self.build_lib: str | None = None
        self.build_temp: str | None = None
        self.editable_mode = False

    def finalize_options(self) -> None:
        self.set_undefined_options(
            "build", ("build_lib", "build_lib"), ("build_temp", "build_temp")
        )

    def _target(self) -> Path:
        # Editable installs import from src/, so the libraries go there.
        return (HERE / "src" if self.editable_mode else Path(str(self.build_lib))) / PACKAGE_LIB

    def run(self) -> None:
        if os.environ.get("GPULAB_NATIVE_BUILD") == "0":
            self.announce("GPULAB_NATIVE_BUILD=0: skipping the native libraries", level=3)
            return
        if shutil.which("cmake") is None:
            raise SetupError(
                "building gpulab's native libraries needs cmake and a C/C++ compiler "
                "(apt-get install cmake build-essential); set GPULAB_NATIVE_BUILD=0 to "
                "install without them"
            )
        build_dir = Path(str(self.build_temp), "native")
        for command in (
            ["cmake", "-S", NATIVE_SOURCE, "-B", build_dir, "-DGPULAB_BUILD_TESTS=OFF"],
            ["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 1)],
            ["cmake", "--install", build_dir, "--prefix", self._target()],
        ):
            subprocess.run([str(part) for part in command], check=True)

    def get_outputs(self) -> list[str]:
        names = ["libgpulab_kernels.so", "libgpulab_suballoc.so"]
        names += ["gpulab_kernels.h", "gpulab_suballoc.h"]
        return [str(self._target() / name) for name in names]

    def get_source_files(self) -> list[str]:
        return [str(p.relative_to(HERE)) for p in NATIVE_SOURCE.rglob("*") if p.is_file()]

    def get_output_mapping(self) -> dict[str, str]:
        return {}


class BuildWithNative(build):
    sub_commands: ClassVar[list[tuple[str, object]]] = [
        *build.sub_commands,
        ("build_native", None),
    ]


class BinaryDistribution(Distribution):
    """The wheel holds compiled libraries, so it is tagged for this platform."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """Tagged py3-none-<platform>: the libraries are plain C, loaded by cffi on any Python 3."""

    def get_tag(self) -> tuple[str, str, str]:
        platform = super().get_tag()[2]
        return "py3", "none", platform


setup(
    cmdclass={
        "build": BuildWithNative,
        "build_native": BuildNative,
        "bdist_wheel": PlatformWheel,
    },
    distclass=BinaryDistribution,
)
