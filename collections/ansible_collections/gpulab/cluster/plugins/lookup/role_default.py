# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Lookup gpulab.cluster.role_default: the default that one of the collection's roles gives its
own variable, for the plays and roles that use that variable without running the role (the
payload's venv, the shared directory), so that the value is written once, where it belongs."""

# Plugins import after DOCUMENTATION, EXAMPLES and RETURN (ansible-test sanity).
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = r"""
---
name: role_default
short_description: The default one of this collection's roles gives its own variable
description:
  - Reads the variable's default from the C(defaults/main.yml) of the collection's role that owns
    it, the role whose name begins the variable's (C(payload_venv) is the payload role's), in the
    collection the lookup runs from. Meant as the fallback of C(VARIABLE | default(...)) where a
    play or another role uses that variable, so that the default is written once.
  - Only a plain default can be read; a default that is itself a template is refused.
version_added: "2.1.0"
author: gpulab contributors (@gpulab)
options:
  _terms:
    description: Variable names, each C(ROLE_NAME) where ROLE is one of the collection's roles.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: gpulab from the payload role's venv, set or not
  ansible.builtin.command:
    argv: ["{{ _venv }}/bin/gpulab", devices]
  vars:
    _venv: "{{ payload_venv | default(lookup('gpulab.cluster.role_default', 'payload_venv')) }}"
  changed_when: false
"""

RETURN = r"""
_raw:
  description: Each variable's default, in the order asked.
  type: list
  elements: raw
"""

from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

ROLES = Path(__file__).resolve().parents[2] / "roles"


def role_default(name: str, roles: Path = ROLES) -> Any:
    """The default of `name` in the defaults/main.yml of the role whose name begins it."""
    owners = [p.name for p in roles.iterdir() if name.startswith(p.name + "_")]
    if not owners:
        raise AnsibleLookupError(f"role_default: no role of the collection owns {name!r}")
    owner = max(owners, key=len)
    defaults = yaml.safe_load((roles / owner / "defaults/main.yml").read_text()) or {}
    if name not in defaults:
        raise AnsibleLookupError(f"role_default: the {owner} role has no default for {name!r}")
    value = defaults[name]
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        raise AnsibleLookupError(f"role_default: the {owner} role's {name} is a template")
    return value


class LookupModule(LookupBase):
    """gpulab.cluster's role_default lookup."""

    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        self.set_options(var_options=variables, direct=kwargs)
        return [role_default(str(term)) for term in terms]
