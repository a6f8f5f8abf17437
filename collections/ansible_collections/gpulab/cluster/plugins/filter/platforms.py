# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Filters gpulab.cluster.platform_refusal and platform_vars_files: the distributions the
roles support, written once for every role.

Each filter's documentation is a file of its own beside this one (platform_refusal.yml,
platform_vars_files.yml): ansible-doc reads those only when this file has no DOCUMENTATION.
"""

from __future__ import annotations

from typing import Any

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
