# Copyright: gpulab contributors
# MIT License (see galaxy.yml)
"""Filters gpulab.cluster.platform_refusal and platform_vars_files: the distributions the
roles support, written once for every role."""

from __future__ import annotations

from typing import Any

DOCUMENTATION = r"""
---
name: platform_refusal
short_description: Why a host's distribution is refused, or '' when the roles support it
description:
  - Supported are Debian 12 and 13, Raspberry Pi OS 12 (bookworm; Ansible reads the 64-bit image as
    Debian, older images as Raspbian), Ubuntu 22.04 (also NVIDIA's L4T r36 of JetPack 6) and Ubuntu
    24.04.
  - The companion filter platform_vars_files gives the role variable files to try, most specific
    first, for include_vars with the first_found lookup.
version_added: "1.0.0"
author: gpulab contributors (@gpulab)
options:
  _input:
    description:
      - The host's ansible_facts (distribution, distribution_version, distribution_major_version,
        os_family).
    type: dict
    required: true
  host:
    description: The host's inventory name, for the message.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Check the distribution
  ansible.builtin.assert:
    that: ansible_facts | gpulab.cluster.platform_refusal(inventory_hostname) == ''
    fail_msg: "{{ ansible_facts | gpulab.cluster.platform_refusal(inventory_hostname) }}"

- name: Load the distribution's variables
  ansible.builtin.include_vars:
    file: "{{ lookup('ansible.builtin.first_found', _files, paths=['vars']) }}"
  vars:
    _files: "{{ ansible_facts | gpulab.cluster.platform_vars_files }}"
"""

RETURN = r"""
_value:
  description: One line naming the host, its distribution and the supported ones; '' when supported.
  type: str
"""

# Distribution (as Ansible names it) -> the releases supported and how they are shown.
# Debian-like releases compare by major version, Ubuntu by its YY.MM version.
SUPPORTED: dict[str, tuple[str, ...]] = {
    "Debian": ("12", "13"),
    "Raspbian": ("12",),
    "Ubuntu": ("22.04", "24.04"),
}
SUPPORTED_TEXT = "Debian 12, 13, Raspberry Pi OS 12, Ubuntu 22.04, 24.04"


def _release(facts: dict[str, Any]) -> str:
    if facts.get("distribution") == "Ubuntu":
        return str(facts.get("distribution_version", ""))
    return str(facts.get("distribution_major_version", ""))


def platform_refusal(facts: dict[str, Any], host: str) -> str:
    """'' for a supported distribution, else the one line that refuses the host."""
    distribution = str(facts.get("distribution", "an unknown distribution"))
    if _release(facts) in SUPPORTED.get(distribution, ()):
        return ""
    version = str(facts.get("distribution_version", "")).strip()
    shown = f"{distribution} {version}".strip()
    return f"gpulab: {host} runs {shown}; supported: {SUPPORTED_TEXT}"


def platform_vars_files(facts: dict[str, Any]) -> list[str]:
    """A role's variable files for this host, most specific first (geerlingguy's order):
    Ubuntu-22.yml, Ubuntu.yml, Debian.yml."""
    distribution = facts.get("distribution", "")
    return [
        f"{distribution}-{facts.get('distribution_major_version', '')}.yml",
        f"{distribution}.yml",
        f"{facts.get('os_family', '')}.yml",
    ]


class FilterModule:
    """gpulab.cluster's platform filters."""

    def filters(self) -> dict[str, Any]:
        return {"platform_refusal": platform_refusal, "platform_vars_files": platform_vars_files}
