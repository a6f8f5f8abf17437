"""The in-repository collection, importable as ansible_collections.gpulab.cluster (its copies of
the payload's module_utils are committed; tests/collection/test_module_entry.py checks them)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def use_collection() -> None:
    """Put the collection on sys.path."""
    if str(REPO / "collections") not in sys.path:
        sys.path.insert(0, str(REPO / "collections"))
