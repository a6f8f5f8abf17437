"""The lab image's bytecode cache for Ansible's payload zips (gpulab_zipimport_cache.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
import zipfile
import zipimport
from pathlib import Path
from types import ModuleType

import pytest

SITE = Path(__file__).resolve().parents[2] / "lab/rootfs/usr/lib/python3/dist-packages"
CACHE_MODULE = SITE / "gpulab_zipimport_cache.py"
SOURCE = b"def where():\n    return where.__code__.co_filename\n"


def _load(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The module loaded as the .pth file loads it, zipimport restored afterwards."""
    monkeypatch.setattr(zipimport, "_compile_source", zipimport._compile_source)  # type: ignore[attr-defined]
    spec = importlib.util.spec_from_file_location("gpulab_zipimport_cache_under_test", CACHE_MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    module = _load(monkeypatch)
    monkeypatch.setattr(module, "_CACHE_DIR", str(tmp_path / "cache"))
    return module


def _import_from(archive: Path) -> ModuleType:
    archive.parent.mkdir(parents=True)
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("probe.py", SOURCE)
    importer = zipimport.zipimporter(str(archive))
    spec = importer.find_spec("probe")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_payload_zip_compiles_once_and_names_each_run_s_file(
    cache: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = tmp_path / "ansible_file_payload_1" / "ansible_file_payload.zip"
    assert _import_from(first).where() == f"{first}/probe.py"
    assert len(list((tmp_path / "cache").iterdir())) == 1

    def no_compile(pathname: str, source: bytes) -> None:
        raise AssertionError(f"compiled {pathname} again")

    monkeypatch.setattr(cache, "_compile_source", no_compile)
    second = tmp_path / "ansible_file_payload_2" / "ansible_file_payload.zip"
    assert _import_from(second).where() == f"{second}/probe.py"


def test_other_zips_are_left_to_zipimport(cache: ModuleType, tmp_path: Path) -> None:
    archive = tmp_path / "app" / "bundle.zip"
    assert _import_from(archive).where() == f"{archive}/probe.py"
    assert not (tmp_path / "cache").exists()


def test_a_failed_write_leaves_no_partial_file(
    cache: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def disk_full(source: str, target: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache.os, "replace", disk_full)
    archive = tmp_path / "ansible_file_payload_1" / "ansible_file_payload.zip"
    assert _import_from(archive).where() == f"{archive}/probe.py"
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the tests run outside a venv")
def test_in_a_venv_the_cache_is_the_venv_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/setup.sh puts the module in the control machine's venv too: the cache is there."""
    cache_dir = _load(monkeypatch)._CACHE_DIR
    assert cache_dir == os.path.join(sys.prefix, "var/cache/gpulab-zipimport")
