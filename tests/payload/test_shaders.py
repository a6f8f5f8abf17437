"""Each committed .spv is what glslc makes of its .comp today (`make shaders` refreshes them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import gpulab
import pytest

SHADERS = Path(gpulab.__file__).parent / "shaders"
SOURCES = sorted(SHADERS.glob("*.comp"))
# The flags of payload/src/gpulab/shaders/Makefile.
GLSLC_FLAGS = ["--target-env=vulkan1.1"]


def test_every_source_has_committed_spirv() -> None:
    assert SOURCES
    assert {p.stem for p in SHADERS.glob("*.spv")} == {p.stem for p in SOURCES}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_committed_spirv_matches_its_source(source: Path, tmp_path: Path) -> None:
    glslc = shutil.which("glslc")
    if glslc is None:
        pytest.skip("glslc is not installed (apt install glslc)")
    fresh = tmp_path / f"{source.stem}.spv"
    subprocess.run([glslc, *GLSLC_FLAGS, "-o", str(fresh), str(source)], check=True)
    committed = source.with_suffix(".spv").read_bytes()
    assert committed == fresh.read_bytes(), f"{source.name} changed: run `make shaders`"
