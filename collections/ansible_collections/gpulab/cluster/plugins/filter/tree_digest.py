# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Filter gpulab.cluster.tree_digest: one SHA-256 for every file under some directories, so
that a role's record of its last converge (gpulab.cluster.converge_record) changes with the
role's own code."""

from __future__ import annotations

import hashlib
import os
from functools import cache
from typing import Any

DOCUMENTATION = r"""
---
name: tree_digest
short_description: One SHA-256 over every file under some directories
description:
  - Walks each directory in order (entries sorted, links followed, compiled Python skipped) and
    hashes each file's path relative to its directory and its bytes; a directory that does not
    exist counts as empty. Read once per directory per run of the control machine.
  - Roles put the digest of their own directory and of the collection's plugins into the inputs
    of gpulab.cluster.converge_record, so that a new version of the role runs in full.
version_added: "2.0.0"
author: gpulab contributors (@gpulab)
options:
  _input:
    description: A directory, or a list of them.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: The digest of this role and of the collection's plugins
  ansible.builtin.debug:
    msg: "{{ [role_path, role_path ~ '/../../plugins'] | gpulab.cluster.tree_digest }}"
"""

RETURN = r"""
_value:
  description: The hexadecimal SHA-256.
  type: str
"""


@cache
def _directory_digest(directory: str) -> str:
    digest = hashlib.sha256()
    for top, folders, files in os.walk(directory, followlinks=True):
        folders[:] = sorted(name for name in folders if name != "__pycache__")
        for name in sorted(files):
            if name.endswith(".pyc"):
                continue
            path = os.path.join(top, name)
            digest.update(os.path.relpath(path, directory).encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def tree_digest(directories: Any) -> str:
    """One SHA-256 over the files under the directories, in the order given."""
    if isinstance(directories, str):
        directories = [directories]
    combined = hashlib.sha256()
    for directory in directories:
        combined.update(_directory_digest(os.path.realpath(str(directory))).encode())
    return combined.hexdigest()


class FilterModule:
    """gpulab.cluster's tree_digest filter."""

    def filters(self) -> dict[str, Any]:
        return {"tree_digest": tree_digest}
