"""The payload release the role deploys, VERSION-HASH, from what it builds or takes.

    payload_release.py source DIR      a gpulab source tree (pyproject.toml's version): the
                                       files git knows of (tracked, or untracked and not
                                       ignored), or, outside a git work tree, every file but
                                       build outputs
    payload_release.py sdist FILE      a gpulab sdist (PKG-INFO's version): its members
    payload_release.py wheelhouse DIR  a ready wheelhouse, one ARCH-cpXY folder per target (the
                                       version of its gpulab wheels): the files of those folders

The hash covers each file's path and content (a link to a folder: its target's name), never
times, so the same input gives the same release: an edit gives a new one and the workers
reinstall. Prints one JSON object, {"version", "release"} and, for a wheelhouse, "targets";
bad input is one line on stderr and exit status 1.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Iterator

# What builds leave in a source tree, left out where git cannot say what is ignored.
BUILD_OUTPUTS = {"build", "__pycache__", "_lib", ".git"}
PYPROJECT_VERSION = re.compile(r'(?m)^version\s*=\s*"([^"]+)"')
PKG_INFO_VERSION = re.compile(r"(?m)^Version:\s*(\S+)")
# A wheelhouse target folder (x86_64-cp311) and the gpulab wheel in it.
TARGET = re.compile(r"^[A-Za-z0-9_]+-cp[0-9]+$")
GPULAB_WHEEL = re.compile(r"^gpulab-([^-]+)-.*\.whl$")


class Refused(Exception):
    """The input is not what the mode expects: the message says what is wrong."""


def digest(entries: Iterable[tuple[str, bytes]]) -> str:
    """The first 12 hex digits of a SHA-256 over every (path, content), sorted by path."""
    total = hashlib.sha256()
    for path, content in sorted(entries):
        total.update(path.encode("utf-8", "surrogateescape") + b"\0")
        total.update(hashlib.sha256(content).digest())
    return total.hexdigest()[:12]


def _read(root: str, relative: str) -> tuple[str, bytes]:
    path = os.path.join(root, relative)
    if os.path.islink(path) and os.path.isdir(path):
        return relative, b"link:" + os.readlink(path).encode("utf-8", "surrogateescape")
    with open(path, "rb") as f:
        return relative, f.read()


def _git_files(root: str) -> list[str] | None:
    """The files git knows of under root, or None where root is not in a git work tree."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "."],
            cwd=root, capture_output=True, check=False,
        )  # fmt: skip
    except OSError:
        return None
    if done.returncode != 0:
        return None
    names = [n.decode("utf-8", "surrogateescape") for n in done.stdout.split(b"\0") if n]
    # A tracked file deleted in the work tree is not part of what is built.
    return [n for n in names if os.path.lexists(os.path.join(root, n))]


def _walked_files(root: str) -> Iterator[str]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if d not in BUILD_OUTPUTS and not d.endswith(".egg-info")
        )
        for name in files:
            if not name.endswith((".pyc", ".so", ".o")):
                yield os.path.relpath(os.path.join(folder, name), root)
        # A link to a folder is one entry, its target's name (os.walk does not enter it).
        for name in dirs:
            if os.path.islink(os.path.join(folder, name)):
                yield os.path.relpath(os.path.join(folder, name), root)


def from_source(root: str) -> dict[str, object]:
    try:
        with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
            version = PYPROJECT_VERSION.search(f.read())
    except OSError as error:
        raise Refused(f"{root} is no gpulab source tree: {error.strerror} (pyproject.toml)") from None
    if version is None:
        raise Refused(f"{root}/pyproject.toml names no version")
    names = _git_files(root)
    if names is None:
        names = list(_walked_files(root))
    release = f"{version[1]}-{digest(_read(root, n) for n in names)}"
    return {"version": version[1], "release": release}


def from_sdist(path: str) -> dict[str, object]:
    entries: list[tuple[str, bytes]] = []
    version = None
    try:
        with tarfile.open(path) as archive:
            for member in archive:
                if not member.isfile():
                    continue
                # Without the top folder (gpulab-VERSION/): the same files, the same release.
                name = member.name.split("/", 1)[-1]
                extracted = archive.extractfile(member)
                content = extracted.read() if extracted is not None else b""
                entries.append((name, content))
                if name == "PKG-INFO":
                    version = PKG_INFO_VERSION.search(content.decode("utf-8", "replace"))
    except (OSError, tarfile.TarError) as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0].rstrip(":")
        raise Refused(f"{path} is no sdist: {reason}") from None
    if version is None:
        raise Refused(f"{path} is no sdist: it has no PKG-INFO with a Version")
    return {"version": version[1], "release": f"{version[1]}-{digest(entries)}"}


def from_wheelhouse(root: str) -> dict[str, object]:
    try:
        folders = sorted(d for d in os.listdir(root) if TARGET.match(d))
    except OSError as error:
        raise Refused(f"{root}: {error.strerror}") from None
    entries: list[tuple[str, bytes]] = []
    versions: dict[str, set[str]] = {}
    for folder in folders:
        for name in sorted(os.listdir(os.path.join(root, folder))):
            path = os.path.join(folder, name)
            if not os.path.isfile(os.path.join(root, path)):
                continue
            entries.append(_read(root, path))
            wheel = GPULAB_WHEEL.match(name)
            if wheel:
                versions.setdefault(wheel[1], set()).add(folder)
    targets = sorted({t for found in versions.values() for t in found})
    if not targets:
        raise Refused(
            f"{root} holds no wheelhouse: no ARCH-cpXY folder (x86_64-cp311, say) with a gpulab wheel"
        )
    if len(versions) > 1:
        raise Refused(f"{root} mixes gpulab versions {', '.join(sorted(versions))}: one release only")
    version = next(iter(versions))
    return {"version": version, "release": f"{version}-{digest(entries)}", "targets": targets}


MODES = {"source": from_source, "sdist": from_sdist, "wheelhouse": from_wheelhouse}


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in MODES:
        print(f"usage: payload_release.py {'|'.join(MODES)} PATH", file=sys.stderr)
        return 1
    try:
        print(json.dumps(MODES[argv[1]](argv[2])))
    except Refused as refused:
        print(f"payload: {refused}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
