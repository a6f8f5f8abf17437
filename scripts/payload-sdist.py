#!/usr/bin/env python3
"""Builds the payload's sdist (what `python -m build --sdist payload` makes) into DEST, for the
collection to carry: scripts/build-collection.sh puts it at the payload role's
files/gpulab.tar.gz, and the role builds the workers' wheels from it wherever the collection is
installed (the native sources, the aarch64 toolchain file and the example graphs are in it).

The build backend pyproject.toml names (setuptools >= 77: the venv's may be older) is installed
once, with this machine's own pip configuration, into build/sdist-backend/HASH; the sdist is
built from a copy of payload/ (links resolved, no build outputs), so that the tree is never
written to and two builds at once never meet. DEST is replaced at once, never half-written.
Usage: scripts/payload-sdist.py DEST
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
PAYLOAD = REPO / "payload"
# What the payload's own builds leave in its tree; none of it belongs in the sdist.
BUILD_OUTPUTS = shutil.ignore_patterns("build", "*.egg-info", "_lib", "__pycache__", "*.so", "*.o")
# PEP 517's build_sdist, called as `python -m build --no-isolation` would; prints the file's name.
BUILD_SDIST = (
    "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
)


def backend(requires: list[str]) -> Path:
    """A folder holding the build requirements, installed by pip once per requirement list."""
    key = hashlib.sha256("\n".join(sorted(requires)).encode()).hexdigest()[:12]
    target = REPO / "build/sdist-backend" / key
    if not (target / ".complete").is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=target.parent))
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(staging),
             *requires],
            check=True,
        )  # fmt: skip
        (staging / ".complete").touch()
        try:
            staging.rename(target)
        except OSError:  # another build installed it first
            shutil.rmtree(staging)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: payload-sdist.py DEST", file=sys.stderr)
        return 2
    dest = Path(argv[1]).resolve()
    requires = tomllib.loads((PAYLOAD / "pyproject.toml").read_text())["build-system"]["requires"]
    with tempfile.TemporaryDirectory(prefix="gpulab-sdist.") as work:
        source = Path(work) / "payload"
        shutil.copytree(PAYLOAD, source, ignore=BUILD_OUTPUTS)
        out = Path(work) / "out"
        env = {**os.environ, "PYTHONPATH": str(backend(requires))}
        done = subprocess.run(
            [sys.executable, "-c", BUILD_SDIST, str(out)],
            cwd=source, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            print(f"payload-sdist.py: building the sdist of {PAYLOAD} failed", file=sys.stderr)
            return 1
        built = out / done.stdout.strip().splitlines()[-1]
        dest.parent.mkdir(parents=True, exist_ok=True)
        staged = dest.with_name(f".{dest.name}.{os.getpid()}")
        shutil.copyfile(built, staged)
        staged.chmod(0o644)
        staged.replace(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
