"""gpulab.cluster.bytecode: module zips carry bytecode the host's Python imports, and a Python of
another version falls back to the source. Real zips, real interpreters, a real ansible run."""

from __future__ import annotations

import base64
import configparser
import dataclasses
import importlib.util
import io
import os
import re
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import pytest
from ansible_collections.gpulab.cluster.plugins.callback import bytecode
from ansible_collections.gpulab.cluster.plugins.callback.bytecode import (
    BytecodeCache,
    with_bytecode,
)

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _import_from(archive: Path, module: str) -> list[str]:
    """MODULE's __file__ and VALUE, imported from the zip by a fresh interpreter."""
    code = (
        f"import sys; sys.path.insert(0, {str(archive)!r}); import {module} as m;"
        " print(m.__file__); print(m.VALUE)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_every_source_gets_bytecode_that_zipimport_uses(tmp_path: Path) -> None:
    raw = _zip({"pkg/__init__.py": "", "pkg/mod.py": "VALUE = 6 * 7\n"})
    augmented = with_bytecode(raw, BytecodeCache(tmp_path / "cache"))
    names = zipfile.ZipFile(io.BytesIO(augmented)).namelist()
    assert names == ["pkg/__init__.py", "pkg/mod.py", "pkg/__init__.pyc", "pkg/mod.pyc"]
    (tmp_path / "payload.zip").write_bytes(augmented)
    file, value = _import_from(tmp_path / "payload.zip", "pkg.mod")
    assert file.endswith("payload.zip/pkg/mod.pyc") and value == "42"


def test_bytecode_of_another_python_is_passed_over_for_the_source(tmp_path: Path) -> None:
    # What a host whose Python is another minor release than the controller's does: the magic
    # number differs, so zipimport compiles the source (which here says something else).
    source = b"VALUE = 'source'\n"
    stale = BytecodeCache(tmp_path / "cache").pyc("other.py", b"VALUE = 'bytecode'\n")
    assert stale is not None
    other_python = bytes([stale[0] ^ 0xFF]) + stale[1:]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("other.py", source)
        archive.writestr("other.pyc", other_python)
    (tmp_path / "payload.zip").write_bytes(buffer.getvalue())
    file, value = _import_from(tmp_path / "payload.zip", "other")
    assert file.endswith("payload.zip/other.py") and value == "source"


def test_a_source_this_python_cannot_compile_travels_without_bytecode(tmp_path: Path) -> None:
    raw = _zip({"good.py": "VALUE = 1\n", "newer.py": "VALUE = (\n"})
    augmented = with_bytecode(raw, BytecodeCache(tmp_path / "cache"))
    assert zipfile.ZipFile(io.BytesIO(augmented)).namelist() == ["good.py", "newer.py", "good.pyc"]


def test_each_file_compiles_once_then_comes_from_the_cache(tmp_path: Path) -> None:
    cache = BytecodeCache(tmp_path / "cache")
    first = cache.pyc("mod.py", b"VALUE = 1\n")
    assert first is not None and first[:4] == importlib.util.MAGIC_NUMBER
    (stored,) = (tmp_path / "cache").iterdir()
    marked = first + b"\0"  # still whole: marshal reads one object and ignores what follows
    stored.write_bytes(marked)
    assert cache.pyc("mod.py", b"VALUE = 1\n") == marked
    assert cache.pyc("mod.py", b"VALUE = 2\n") != marked  # another source
    assert cache.pyc("other.py", b"VALUE = 1\n") != marked  # another name


def test_a_damaged_cache_file_is_compiled_again(tmp_path: Path) -> None:
    cache = BytecodeCache(tmp_path / "cache")
    whole = cache.pyc("mod.py", b"VALUE = 1\n")
    assert whole is not None
    (stored,) = (tmp_path / "cache").iterdir()
    stored.write_bytes(whole[:-3])  # cut short, as by a full disk
    assert cache.pyc("mod.py", b"VALUE = 1\n") == whole
    assert stored.read_bytes() == whole


def test_a_cache_that_cannot_be_written_costs_only_the_compile(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert BytecodeCache(blocker / "cache").pyc("mod.py", b"VALUE = 1\n") is not None


def test_a_real_module_run_carries_and_uses_the_bytecode(tmp_path: Path) -> None:
    """ansible ad hoc, local connection, the payload kept: the zip it ran has a .pyc per .py."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")} | {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",  # ad hoc commands load callbacks only when asked
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal",  # the result as JSON
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        "ANSIBLE_CALLBACK_BYTECODE_CACHE_DIR": str(tmp_path / "cache"),
        "ANSIBLE_PIPELINING": "0",
        "ANSIBLE_KEEP_REMOTE_FILES": "1",
        "ANSIBLE_REMOTE_TMP": str(tmp_path / "remote"),
    }
    done = subprocess.run(
        [str(BIN / "ansible"), "localhost", "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}",
         "-m", "ansible.builtin.stat", "-a", f"path={REPO / 'ansible.cfg'}"],
        capture_output=True, text=True, check=False, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 0 and '"exists": true' in done.stdout, done.stdout + done.stderr
    (wrapper,) = (tmp_path / "remote").glob("*/AnsiballZ_stat.py")
    encoded = re.search(r"'([A-Za-z0-9+/=]{1000,})'", wrapper.read_text())
    assert encoded
    names = set(zipfile.ZipFile(io.BytesIO(base64.b64decode(encoded[1]))).namelist())
    sources = {name for name in names if name.endswith(".py")}
    assert "ansible/module_utils/basic.py" in sources
    assert {f"{name}c" for name in sources} <= names
    assert len(list((tmp_path / "cache").iterdir())) == len(sources)


def test_the_lab_and_molecule_enable_it() -> None:
    config = configparser.ConfigParser()
    config.read(REPO / "ansible.cfg")
    assert "gpulab.cluster.bytecode" in config["defaults"]["callbacks_enabled"]
    assert "gpulab.cluster.bytecode" in (REPO / ".config/molecule/config.yml").read_text()


def test_an_ansible_core_it_does_not_know_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytecode, "module_common", types.SimpleNamespace())
    assert "no _CachedModule" in str(bytecode.install(BytecodeCache(tmp_path)))


def test_a_zip_it_cannot_read_is_sent_as_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
    class CachedModule:  # the shape of ansible-core 2.19's
        zip_data: bytes
        metadata: object

    monkeypatch.setattr(
        bytecode, "module_common", types.SimpleNamespace(_CachedModule=CachedModule)
    )
    assert bytecode.install(BytecodeCache(tmp_path)) is None
    broken = base64.b64encode(b"not a zip")
    assert CachedModule(zip_data=broken, metadata=None).zip_data == broken
    good = CachedModule(zip_data=base64.b64encode(_zip({"m.py": "VALUE = 1\n"})), metadata=None)
    assert zipfile.ZipFile(io.BytesIO(base64.b64decode(good.zip_data))).namelist() == [
        "m.py",
        "m.pyc",
    ]
