"""Every role's README.md is what scripts/role_readmes.py derives from its argument specs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_role_readme_matches_its_argument_specs() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts/role_readmes.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
