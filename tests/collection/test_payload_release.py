"""roles/payload/files/payload_release.py: the release the payload role deploys, VERSION-HASH,
of a source tree, an sdist or a ready wheelhouse. The same input gives the same release (times
and the sdist's top folder do not count), any edit a new one; bad input is one line."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles/payload/files/payload_release.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("payload_release", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


payload_release = _load()


def _release(mode: str, path: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), mode, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _refusal(mode: str, path: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), mode, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def _source(root: Path) -> Path:
    (root / "src/gpulab/examples").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "gpulab"\nversion = "1.2.3"\n')
    (root / "src/gpulab/__init__.py").write_text("")
    (root / "src/gpulab/examples/a.json").write_text("{}")
    (root / "examples").symlink_to("src/gpulab/examples")
    return root


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_a_source_tree_outside_git_leaves_out_build_outputs(tmp_path: Path) -> None:
    root = _source(tmp_path / "payload")
    first = _release("source", root)
    assert first["version"] == "1.2.3" and str(first["release"]).startswith("1.2.3-")
    for output in ("build/lib/x.py", "src/gpulab.egg-info/PKG-INFO", "src/gpulab/native/_lib/a.so"):
        (root / output).parent.mkdir(parents=True, exist_ok=True)
        (root / output).write_text("built")
    assert _release("source", root) == first
    (root / "src/gpulab/examples/a.json").write_text('{"version": 1}')
    assert _release("source", root) != first


def test_a_source_tree_in_git_counts_what_git_knows_of(tmp_path: Path) -> None:
    root = _source(tmp_path / "repo/payload")
    (tmp_path / "repo/.gitignore").write_text("*.log\n")
    _git(tmp_path / "repo", "init", "-q")
    _git(tmp_path / "repo", "add", ".")
    first = _release("source", root)
    (root / "ignored.log").write_text("noise")
    assert _release("source", root) == first
    (root / "new.py").write_text("x = 1\n")  # untracked, not ignored: part of the build
    second = _release("source", root)
    assert second != first
    (root / "new.py").unlink()
    (root / "src/gpulab/__init__.py").unlink()  # tracked but deleted: not part of the build
    assert _release("source", root) not in (first, second)


def _sdist(path: Path, top: str, files: dict[str, bytes], mtime: int) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime = len(content), mtime
            archive.addfile(info, io.BytesIO(content))
    return path


def test_an_sdist_counts_its_members_not_their_times_or_top_folder(tmp_path: Path) -> None:
    files = {"PKG-INFO": b"Metadata-Version: 2.4\nName: gpulab\nVersion: 0.1.0\n", "a.py": b"1"}
    one = _release("sdist", _sdist(tmp_path / "one.tar.gz", "gpulab-0.1.0", files, 1))
    two = _release("sdist", _sdist(tmp_path / "two.tar.gz", "renamed", files, 2_000_000_000))
    assert one == two and one["version"] == "0.1.0"
    files["a.py"] = b"2"
    assert _release("sdist", _sdist(tmp_path / "three.tar.gz", "gpulab-0.1.0", files, 1)) != one


def test_the_built_sdist_gives_the_same_release_each_build(tmp_path: Path) -> None:
    """scripts/payload-sdist.py twice: the role's release (and the workers' venvs) hold."""
    releases = []
    for name in ("a.tar.gz", "b.tar.gz"):
        subprocess.run(
            [sys.executable, str(REPO / "scripts/payload-sdist.py"), str(tmp_path / name)],
            check=True, capture_output=True,
        )  # fmt: skip
        releases.append(_release("sdist", tmp_path / name))
    assert releases[0] == releases[1]
    assert releases[0]["release"] != _release("source", REPO / "payload")["release"]


def _wheelhouse(root: Path, targets: dict[str, str]) -> Path:
    for target, version in targets.items():
        (root / target).mkdir(parents=True)
        (root / target / f"gpulab-{version}-py3-none-linux_x86_64.whl").write_bytes(b"wheel")
        (root / target / "numpy-2.0.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"np")
    return root


def test_a_wheelhouse_names_its_targets_and_version(tmp_path: Path) -> None:
    root = _wheelhouse(tmp_path / "wh", {"x86_64-cp311": "0.1.0", "aarch64-cp312": "0.1.0"})
    (root / "wheel-x86_64").mkdir()  # a build's own folder: not a target
    first = _release("wheelhouse", root)
    assert first["targets"] == ["aarch64-cp312", "x86_64-cp311"]
    assert first["version"] == "0.1.0"
    (root / "x86_64-cp311/cffi-1.17.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"c")
    assert _release("wheelhouse", root)["release"] != first["release"]


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    assert "no gpulab source tree" in _refusal("source", tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    assert "names no version" in _refusal("source", tmp_path)
    (tmp_path / "broken.tar.gz").write_text("not a tarball")
    assert "is no sdist" in _refusal("sdist", tmp_path / "broken.tar.gz")
    assert "holds no wheelhouse" in _refusal("wheelhouse", tmp_path)
    mixed = _wheelhouse(tmp_path / "mixed", {"x86_64-cp311": "0.1.0", "x86_64-cp312": "0.2.0"})
    assert "mixes gpulab versions 0.1.0, 0.2.0" in _refusal("wheelhouse", mixed)


@pytest.mark.parametrize("argv", [["x"], ["x", "tarball", "/"]])
def test_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert payload_release.main(argv) == 1
    assert "usage:" in capsys.readouterr().err
