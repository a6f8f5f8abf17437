# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Filters gpulab.cluster.slurm_release and slurm_version_refusals: which Slurm versions may
meet in one cluster, and which upgrades a host may make, by SchedMD's compatibility window.

Each filter's documentation is a file of its own beside this one (slurm_release.yml,
slurm_version_refusals.yml): ansible-doc reads those only when this file has no DOCUMENTATION.
"""

from __future__ import annotations

import re
from typing import Any

# Every major release since 17.02, oldest first: the cadence was irregular until 24.05.
RELEASES = (
    "17.02", "17.11", "18.08", "19.05", "20.02", "20.11", "21.08", "22.05",
    "23.02", "23.11", "24.05", "24.11", "25.05", "25.11",
)  # fmt: skip
# From 24.05 on, a release every May and November: later ones follow that rule.
_SIX_MONTHLY = ("05", "11")
# 24.11 widened the window from two older releases to three.
_WIDER_WINDOW_FROM = "24.11"
_RELEASE = re.compile(r"(?:^|[\s:])(\d{2})\.(\d{2})(?:\.\d+)?")


def slurm_release(version: str) -> str:
    """The major release (YY.MM) in a package version or `sinfo -V` output, or ''."""
    match = _RELEASE.search(str(version or ""))
    return f"{match.group(1)}.{match.group(2)}" if match else ""


def _index(release: str) -> int | None:
    """The release's place in Slurm's sequence, or None for a name that was never a release."""
    if release in RELEASES:
        return RELEASES.index(release)
    year, month = release.split(".")
    last_year = int(RELEASES[-1].split(".", maxsplit=1)[0])
    if month not in _SIX_MONTHLY or int(year) <= last_year:
        return None
    return len(RELEASES) + (int(year) - last_year - 1) * 2 + _SIX_MONTHLY.index(month)


def _name(index: int) -> str:
    """The release at a place in the sequence (the inverse of _index)."""
    if index < len(RELEASES):
        return RELEASES[index]
    years, half = divmod(index - len(RELEASES), 2)
    return f"{int(RELEASES[-1].split('.', maxsplit=1)[0]) + 1 + years}.{_SIX_MONTHLY[half]}"


def _window(controller_index: int) -> int:
    return 3 if controller_index >= RELEASES.index(_WIDER_WINDOW_FROM) else 2


def _accepted(controller_index: int) -> str:
    low = max(controller_index - _window(controller_index), 0)
    return ", ".join(_name(i) for i in range(controller_index, low - 1, -1))


def _upgrade_refusal(host: str, installed: str, version: str) -> str:
    """A line when going from the installed version to the new one skips too many releases."""
    old, new = slurm_release(installed), slurm_release(version)
    old_index, new_index = _index(old) if old else None, _index(new) if new else None
    if old_index is None or new_index is None or old_index == new_index:
        return ""
    where = f"slurm: {host} would go from Slurm {old} ({installed}) to {new} ({version})"
    if new_index < old_index:
        return f"{where}, a downgrade: no Slurm reads the state of a newer one; pin {old}"
    if new_index - old_index <= _window(new_index):
        return ""
    skipped = ", ".join(_name(i) for i in range(old_index + 1, new_index))
    # The newest release that still reads the installed one's state: the next step.
    step = max(i for i in range(old_index + 1, new_index) if i - old_index <= _window(i))
    return (
        f"{where}, skipping {skipped}; {new} reads the state and accounting of "
        f"{_accepted(new_index).split(', ', 1)[1]} only: upgrade to {_name(step)} first "
        "(docs/operations.md)"
    )


def slurm_version_refusals(
    versions: dict[str, str], controller: str, installed: dict[str, str] | None = None
) -> list[str]:
    """One line per host whose Slurm the controller's would refuse, or cannot be judged, and
    per host whose upgrade from its installed Slurm would skip too many releases."""
    upgrades = [
        _upgrade_refusal(host, old, versions.get(host, ""))
        for host, old in sorted((installed or {}).items())
        if old
    ]
    ours = slurm_release(versions.get(controller, ""))
    ours_index = _index(ours) if ours else None
    if ours_index is None:
        return [
            f"slurm: the controller {controller} has no Slurm package to install or a release "
            f"Slurm never made ({versions.get(controller) or 'none'}); enable the repository that "
            "has slurmctld (Ubuntu: universe)"
        ]
    refusals = []
    for host, version in sorted(versions.items()):
        theirs = slurm_release(version)
        index = _index(theirs) if theirs else None
        where = f"slurm: {host} would run Slurm {theirs or 'none'} ({version or 'no package'})"
        if index is None:
            refusals.append(f"{where}, which cannot be judged: enable the repository with Slurm")
        elif index > ours_index:
            refusals.append(
                f"{where}, newer than {ours} on the controller {controller}; a controller must run "
                "the newest Slurm of its cluster (docs/cluster_bootstrap.md)"
            )
        elif ours_index - index > _window(ours_index):
            refusals.append(
                f"{where}, too old for {ours} on the controller {controller}, which accepts "
                f"{_accepted(ours_index)}; see docs/cluster_bootstrap.md"
            )
    return [line for line in upgrades if line] + refusals


class FilterModule:
    """gpulab.cluster's Slurm version filters."""

    def filters(self) -> dict[str, Any]:
        return {"slurm_release": slurm_release, "slurm_version_refusals": slurm_version_refusals}
