"""The wheel as the payload role builds it (`pip wheel payload/`): it carries the licence, the
project's links and classifiers, and the dependency ranges whose ends the tests were run on."""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
PROJECT_URL = "https://github.com/gpulab/gpulab"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # From a copy, its links resolved as the build resolves them: pip builds in the source tree,
    # and the tree under test keeps no build/ or egg-info of the test's.
    source = tmp_path_factory.mktemp("source") / "payload"
    shutil.copytree(
        REPO / "payload", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "_lib")
    )
    out = tmp_path_factory.mktemp("wheel")
    # Without the native libraries: they change nothing here and need CMake.
    env = {**os.environ, "GPULAB_NATIVE_BUILD": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out),
         str(source)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("gpulab-*.whl")
    return built


def _metadata(wheel: Path) -> tuple[Message, dict[str, bytes]]:
    with zipfile.ZipFile(wheel) as archive:
        (info,) = {name.split("/")[0] for name in archive.namelist() if ".dist-info/" in name}
        files = {
            name.removeprefix(f"{info}/"): archive.read(name)
            for name in archive.namelist()
            if name.startswith(f"{info}/")
        }
    return email.message_from_bytes(files["METADATA"]), files


def test_the_wheel_carries_the_licence(wheel: Path) -> None:
    metadata, files = _metadata(wheel)
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert files["licenses/LICENSE"] == (REPO / "LICENSE").read_bytes()


def test_the_wheel_names_the_project_links_and_classifiers(wheel: Path) -> None:
    metadata, _ = _metadata(wheel)
    links = dict(line.split(", ", 1) for line in metadata.get_all("Project-URL") or [])
    assert set(links) == {"Homepage", "Documentation", "Source", "Issues"}
    for url in links.values():
        assert url == PROJECT_URL or url.startswith(f"{PROJECT_URL}/"), url
    classifiers = metadata.get_all("Classifier") or []
    assert "Operating System :: POSIX :: Linux" in classifiers
    # The Python these tests run on is one the wheel claims.
    assert f"Programming Language :: Python :: 3.{sys.version_info.minor}" in classifiers


def test_the_dependency_ranges_are_the_tested_ones(wheel: Path) -> None:
    """Each range's ends passed tests/submit and the vk tests in a venv of their own; a range
    that moves needs that run again (the lowest and the highest release it allows)."""
    metadata, _ = _metadata(wheel)
    requirements = {
        Requirement(line).name: Requirement(line)
        for line in metadata.get_all("Requires-Dist") or []
    }
    paramiko = requirements["paramiko"]
    assert str(paramiko.marker) == 'extra == "submit"'
    assert {v: paramiko.specifier.contains(v) for v in ("3.4.0", "3.4.1", "5.1.0", "6.0.0")} == {
        "3.4.0": False,  # cryptography's TripleDES warnings on import: no one-line errors
        "3.4.1": True,
        "5.1.0": True,
        "6.0.0": False,
    }
    vulkan = requirements["vulkan"]
    assert {v: vulkan.specifier.contains(v) for v in ("1.3.275.0", "1.3.275.1", "1.4.0")} == {
        "1.3.275.0": False,  # lacks vkGetPhysicalDeviceProperties2
        "1.3.275.1": True,
        "1.4.0": False,
    }


def test_the_wheel_carries_the_example_graphs(wheel: Path) -> None:
    """Every example graph, and the GLSL kernels they name, is package data: a worker's
    validation runs those of its own gpulab (the collection's validate-job.sh.j2), wherever
    the payload was built from."""
    examples = REPO / "payload/src/gpulab/examples"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            name.removeprefix("gpulab/examples/"): archive.read(name)
            for name in archive.namelist()
            if name.startswith("gpulab/examples/")
        }
    expected = {
        path.name: path.read_bytes()
        for pattern in ("*.json", "*.comp")
        for path in examples.glob(pattern)
    }
    assert len(expected) >= 4
    assert {"user_kernels.json", "leaky_relu.comp", "softplus.comp"} <= expected.keys()
    assert shipped == expected
    # The repository's payload/examples, which docs and tests name, is the same folder.
    assert (REPO / "payload/examples").resolve() == examples
