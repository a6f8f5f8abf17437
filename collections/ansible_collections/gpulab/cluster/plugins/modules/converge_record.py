#!/usr/bin/python
# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Ansible module gpulab.cluster.converge_record: whether a role's last converge on this host
still holds, and the record that says so."""

# Ansible modules import after DOCUMENTATION, EXAMPLES and RETURN.
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = r"""
---
module: converge_record
short_description: Tell whether a role's last converge on this host still holds
description:
  - A role that passed on a host records, with O(state=record), a digest of what it converged
    from (O(inputs)), the SHA-256 of each file it manages (O(files)), the version of each package
    it installs (O(packages)) and the services it runs (O(services)).
  - At the next converge, O(state=check) tells whether that record still holds - the same
    inputs, every file as recorded (or still absent), every package at the recorded version,
    every service active and enabled - and names the first difference in RV(reason). The role
    then runs its tasks only where it does not hold, so a converge with nothing to do costs one
    module run per role and host.
  - Whole files that other roles change too (C(/etc/passwd) as packages add their users) do not
    belong in O(files); O(users) and O(groups) record only the accounts a role manages.
  - A check that finds the record does not hold removes it (unless in check mode), so that a
    converge that then fails half-way leaves no record behind and the next converge runs in full.
  - What it cannot see is drift outside these files, packages and services (a user deleted, a
    directory's mode changed); roles let their gate be turned off for a full converge.
  - The records and their folder are root's alone (0600, 0700), and their digests are keyed with a
    secret of the host (HMAC-SHA-256, the folder's C(.key)), so that a record of a file holding a
    secret (slurmdbd.conf) lets nobody check guesses of that secret against it.
version_added: "2.0.0"
author: gpulab contributors (@gpulab)
options:
  path:
    description: The record's file, one per role.
    type: path
    required: true
  state:
    description: C(check) reads the record and the host; C(record) writes the record.
    type: str
    choices: [check, record]
    default: check
  inputs:
    description:
      - What the role converged from on this host (its settings, rendered configuration,
        its own code's digest); any data that serialises to JSON. Only its SHA-256 is kept.
      - Module arguments show in verbose output, so where the settings hold secrets pass their
        digest instead, as the collection's roles do (C(to_json(sort_keys=True) | hash('sha256'))).
    type: raw
    default: {}
  files:
    description: The files the role manages; a missing file is recorded as absent.
    type: list
    elements: path
    default: []
  packages:
    description: The Debian packages the role installs, recorded with their installed version.
    type: list
    elements: str
    default: []
  services:
    description: The systemd units the role keeps active and enabled.
    type: list
    elements: str
    default: []
  users:
    description: The accounts the role manages, recorded as their C(/etc/passwd) entry (or absent).
    type: list
    elements: str
    default: []
  groups:
    description:
      - The groups the role manages, recorded with their GID (or absent). Not their members, which
        other roles add to (device groups for job users).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Runs in check mode; C(check) reads only, C(record) predicts the change.
    support: full
"""

EXAMPLES = r"""
- name: Check whether the last converge of this role still holds
  gpulab.cluster.converge_record:
    path: /var/lib/gpulab/converged/munge.json
    inputs: >-
      {{ {'settings': munge_settings, 'code': role_path | gpulab.cluster.tree_digest}
         | to_json(sort_keys=True) | hash('sha256') }}
    files: [/etc/munge/munge.key]
    packages: [munge]
    services: [munge]
  register: munge_converged

- name: Converge munge
  when: not munge_converged.holds
  ansible.builtin.include_tasks: converge.yml
"""

RETURN = r"""
holds:
  description: With C(state=check), whether the record is there and everything matches it.
  returned: always
  type: bool
reason:
  description: Why the record does not hold ('' where it does).
  returned: always
  type: str
  sample: /etc/slurm/slurm.conf differs from the last converge
"""

import grp
import hashlib
import hmac
import json
import os
import pwd
import secrets
import stat
import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC: dict[str, Any] = {
    "path": {"type": "path", "required": True},
    "state": {"type": "str", "choices": ["check", "record"], "default": "check"},
    "inputs": {"type": "raw", "default": {}},
    "files": {"type": "list", "elements": "path", "default": []},
    "packages": {"type": "list", "elements": "str", "default": []},
    "services": {"type": "list", "elements": "str", "default": []},
    "users": {"type": "list", "elements": "str", "default": []},
    "groups": {"type": "list", "elements": "str", "default": []},
}


# The records' digests are keyed with a secret of this host (HMAC-SHA-256): a record holds the
# digest of slurmdbd.conf, and a plain digest let anyone who could read it check guesses of the
# password against the public template. The key, like the records, is root's alone.
KEY_FILE = ".key"
KEY_BYTES = 32


def record_key(directory: str) -> bytes | None:
    """This host's key for the records in `directory`, or None where there is none yet."""
    try:
        with open(os.path.join(directory, KEY_FILE), "rb") as handle:
            key = handle.read()
    except FileNotFoundError:
        return None
    return key if len(key) == KEY_BYTES else None


def made_record_key(directory: str) -> bytes:
    """This host's key for the records in `directory`, made when there is none."""
    existing = record_key(directory)
    if existing is not None:
        return existing
    path = os.path.join(directory, KEY_FILE)
    key = secrets.token_bytes(KEY_BYTES)
    descriptor = os.open(f"{path}.new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key)
    os.replace(f"{path}.new", path)
    return key


def inputs_digest(inputs: Any, key: bytes) -> str:
    """Keyed digest of the inputs, independent of key order."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def file_digest(path: str, key: bytes) -> str | None:
    """Keyed digest of a file's bytes, or None where there is none."""
    digest = hmac.new(key, digestmod=hashlib.sha256)
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def package_versions(packages: list[str]) -> dict[str, str | None]:
    """Each package's installed version (None where not installed), from one dpkg-query."""
    versions: dict[str, str | None] = dict.fromkeys(packages)
    if not packages:
        return versions
    listing = subprocess.run(
        [
            "dpkg-query",
            "--show",
            "--showformat=${Package} ${db:Status-Status} ${Version}\n",
            *packages,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in listing.stdout.splitlines():
        name, status, version = [*line.split(" ", 2), "", ""][:3]
        if name in versions and status == "installed":
            versions[name] = version
    return versions


def account(name: str) -> list[Any] | None:
    """An account's /etc/passwd entry but its password field, or None where there is none."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return [entry.pw_uid, entry.pw_gid, entry.pw_gecos, entry.pw_dir, entry.pw_shell]


def group(name: str) -> int | None:
    """A group's GID, or None where there is none."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def service_problem(services: list[str]) -> str:
    """The first service that is not active or not enabled, as a sentence; '' for none."""
    if not services:
        return ""
    for verb in ("is-active", "is-enabled"):
        answer = subprocess.run(
            ["systemctl", verb, *services], capture_output=True, text=True, check=False
        )
        states = answer.stdout.split()
        for index, name in enumerate(services):
            state = states[index] if index < len(states) else "unknown"
            if state not in ("active", "enabled", "static", "alias", "indirect", "generated"):
                return f"{name} is {state}"
    return ""


def host_state(params: dict[str, Any], key: bytes) -> dict[str, Any]:
    """What the record keeps: the inputs' digest, the files' and packages' state now."""
    return {
        "inputs": inputs_digest(params["inputs"], key),
        "files": {path: file_digest(path, key) for path in params["files"]},
        "packages": package_versions(params["packages"]),
        "services": sorted(params["services"]),
        "users": {name: account(name) for name in params["users"]},
        "groups": {name: group(name) for name in params["groups"]},
    }


def first_difference(recorded: dict[str, Any], now: dict[str, Any]) -> str:
    """Why the record does not hold for the state now, or '' where it does."""
    if recorded.get("inputs") != now["inputs"]:
        return "what the role converges from changed"
    for path, digest in now["files"].items():
        if recorded.get("files", {}).get(path, "unrecorded") != digest:
            return f"{path} differs from the last converge"
    for name, version in now["packages"].items():
        if recorded.get("packages", {}).get(name, "unrecorded") != version:
            return f"package {name} differs from the last converge"
    if recorded.get("services") != now["services"]:
        return "the services to run changed"
    for kind in ("users", "groups"):
        for name, entry in now[kind].items():
            if recorded.get(kind, {}).get(name, "unrecorded") != entry:
                return f"{kind[:-1]} {name} differs from the last converge"
    return ""


def read_record(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def check(module: AnsibleModule) -> None:
    params = module.params
    recorded = read_record(params["path"])
    key = record_key(os.path.dirname(params["path"]))
    if recorded is None or key is None:
        module.exit_json(changed=False, holds=False, reason="no record of a converge")
    reason = first_difference(recorded, host_state(params, key))
    reason = reason or service_problem(params["services"])
    if reason and not module.check_mode:
        os.unlink(params["path"])  # a converge that fails from here on leaves no record
    module.exit_json(changed=False, holds=not reason, reason=reason)


def _private(path: str, mode: int) -> bool:
    """Whether `path` exists with exactly `mode` (root's alone)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode) == mode
    except FileNotFoundError:
        return False


def record(module: AnsibleModule) -> None:
    path = module.params["path"]
    directory = os.path.dirname(path)
    key = record_key(directory)
    text = (
        json.dumps(host_state(module.params, key), indent=1, sort_keys=True) + "\n" if key else ""
    )
    try:
        with open(path, encoding="utf-8") as handle:
            unchanged = bool(text) and handle.read() == text
    except FileNotFoundError:
        unchanged = False
    unchanged = unchanged and _private(directory, 0o700) and _private(path, 0o600)
    if not unchanged and not module.check_mode:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)  # records before 2.0.0 lay in a 0755 folder, each 0644
        key = made_record_key(directory)
        text = json.dumps(host_state(module.params, key), indent=1, sort_keys=True) + "\n"
        partial = f"{path}.new"
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(partial, 0o600)
        os.replace(partial, path)
    module.exit_json(changed=not unchanged, holds=True, reason="")


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if module.params["state"] == "check":
        check(module)
    record(module)


if __name__ == "__main__":
    main()
