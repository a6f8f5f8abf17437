"""Makes the in-repository collection importable as ansible_collections.gpulab.cluster."""

from __future__ import annotations

from tests.in_repo_collection import use_collection

use_collection()
