# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Filter gpulab.cluster.slurm_conf_change: what a change of the Slurm configuration files
needs from the running daemons (nothing, `scontrol reconfigure`, or restarts), and why."""

from __future__ import annotations

import re
import shlex
from typing import Any

DOCUMENTATION = r"""
---
name: slurm_conf_change
short_description: Whether a Slurm configuration change needs a reconfigure or daemon restarts
description:
  - Compares the Slurm configuration files before and after a change, key by key (slurm.conf and
    the files it includes are read as one configuration; gres.conf and cgroup.conf as text), and
    says what the running daemons need so that they apply it, in the words of Slurm's
    documentation (scontrol(1) reconfigure, slurm.conf(5)).
  - C(none) when nothing that Slurm reads changed (comments, blank lines, the order of keys).
    C(reconfigure) when `scontrol reconfigure` applies it (partitions, most scheduling keys, a
    node's RealMemory, Weight or Features). C(restart) when a daemon must restart (AuthType,
    SlurmctldHost, ports, plugins, StateSaveLocation, a node's CPU layout or GRES, nodes added or
    removed before Slurm 23.11; gres.conf and cgroup.conf, which slurmd reads only at its start).
version_added: "2.0.0"
author: gpulab contributors (@gpulab)
options:
  _input:
    description: The files before the change, by name (slurm.conf, nodes.conf, gres.conf, ...); a
      missing file is '' or absent.
    type: dict
    required: true
  new:
    description: The files after the change, named as in the input.
    type: dict
    required: true
  release:
    description: The Slurm release (YY.MM) that runs the daemons; from 23.11 on, a reconfigure
      adds and removes nodes. '' counts as older.
    type: str
    default: ''
"""

EXAMPLES = r"""
- name: Decide what the new configuration needs
  ansible.builtin.set_fact:
    change: "{{ old_files | gpulab.cluster.slurm_conf_change(new_files, '22.05') }}"
# change.action: restart; change.restart: [slurmctld, slurmd]; change.reconfigure: false
# change.reasons: ["SelectType changed (select/cons_res -> select/cons_tres)"]
"""

RETURN = r"""
_value:
  description: What the daemons need.
  type: dict
  contains:
    action:
      description: none, reconfigure or restart (the strongest that any change needs).
      type: str
    restart:
      description: The daemons to restart, slurmctld before slurmd; [] when none.
      type: list
      elements: str
    reconfigure:
      description: Whether `scontrol reconfigure` must run (changes that it applies, and no
        slurmctld restart that would apply them anyway).
      type: bool
    reasons:
      description: One line per change that decided it, naming the key or file.
      type: list
      elements: str
"""

BOTH = ("slurmctld", "slurmd")
SLURMD = ("slurmd",)

# slurm.conf keys (lower case) that `scontrol reconfigure` does not apply: scontrol(1)
# "reconfigure" (AuthType, ControlMachine/SlurmctldHost, PluginDir, StateSaveLocation, the ports),
# and the keys whose entry in slurm.conf(5) asks for a restart (plugins loaded once, the users
# the daemons run as, their PID files and spool). Both daemons restart for all of them: each
# reads slurm.conf, and a slurmd left on the old plugins would disagree with slurmctld.
RESTART_KEYS = frozenset(
    {
        "accountingstoragehost", "accountingstorageport", "accountingstoragetype",
        "authalttypes", "authinfo", "authtype", "backupaddr", "backupcontroller",
        "clustername", "controladdr", "controlmachine", "credtype", "grestypes",
        "jobacctgathertype", "launchtype", "plugindir", "prioritytype", "proctracktype",
        "routeplugin", "schedulertype", "selecttype", "selecttypeparameters",
        "slurmctldaddr", "slurmctldhost", "slurmctldpidfile", "slurmctldport",
        "slurmdpidfile", "slurmdport", "slurmdspooldir", "slurmduser", "slurmuser",
        "statesavelocation", "switchtype", "taskplugin", "topologyplugin",
    }
)  # fmt: skip

# A node's keys that describe its hardware: slurmctld keeps its bitmaps of CPUs and GRES
# from its start, and a slurmd that registers with another layout than slurmctld holds is
# set INVALID ("CoreSpec differ"): both restart, slurmd stopped while slurmctld restarts.
NODE_RESTART_KEYS = frozenset(
    {
        "boards", "corespeccount", "corespersocket", "cpus", "cpuspeclist", "gres",
        "nodeaddr", "nodehostname", "port", "sockets", "socketsperboard", "threadspercore",
    }
)  # fmt: skip

# Files that slurmd reads only at its start (gres.conf(5), cgroup.conf(5)).
SLURMD_FILES = ("gres.conf", "cgroup.conf")

# From 23.11 on, `scontrol reconfigure` restarts slurmctld in place and adds or removes nodes.
NODES_BY_RECONFIGURE_FROM = (23, 11)

# Lines that name an entity (a node, a partition, ...) instead of setting global keys.
_ENTITY_KEYS = ("nodename", "partitionname", "nodeset", "downnodes", "frontendname")
_RELEASE = re.compile(r"^(\d{2})\.(\d{2})")

Entities = dict[tuple[str, str], dict[str, str]]


def _logical_lines(text: str) -> list[str]:
    """The file's lines without comments, blank lines and Include lines, continuations joined."""
    lines: list[str] = []
    pending = ""
    for raw in (text or "").splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line and not line.lower().startswith("include "):
            lines.append(line)
    if pending.strip():
        lines.append(pending.strip())
    return lines


def _pairs(line: str) -> list[tuple[str, str]]:
    """KEY=VALUE words of one line, keys in lower case (Slurm's keys ignore case)."""
    pairs = []
    for word in shlex.split(line, posix=True):
        key, _equals, value = word.partition("=")
        pairs.append((key.lower(), value))
    return pairs


def parse_slurm_conf(text: str) -> tuple[dict[str, str], Entities]:
    """Global keys and entities (nodes, partitions, ...) of a slurm.conf text."""
    settings: dict[str, str] = {}
    entities: Entities = {}
    for line in _logical_lines(text):
        pairs = _pairs(line)
        kind, name = pairs[0]
        if kind in _ENTITY_KEYS:
            entities[(kind, name)] = dict(pairs[1:])
        else:
            for key, value in pairs:
                # A repeated key (SlurmctldHost) keeps every value, in order.
                settings[key] = f"{settings[key]},{value}" if key in settings else value
    return settings, entities


def _release_at_least(release: str, wanted: tuple[int, int]) -> bool:
    match = _RELEASE.match(release or "")
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= wanted


def _label(kind: str, name: str) -> str:
    return {"nodename": "node", "partitionname": "partition"}.get(kind, kind) + f" {name}"


def _show(value: str | None) -> str:
    return "unset" if value is None else value or "''"


def _setting_changes(old: dict[str, str], new: dict[str, str]) -> tuple[list[str], list[str]]:
    """(reasons for a restart, reasons for a reconfigure) from the global keys."""
    restart, reconfigure = [], []
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        line = f"{key} changed ({_show(old.get(key))} -> {_show(new.get(key))})"
        (restart if key in RESTART_KEYS else reconfigure).append(line)
    return restart, reconfigure


def _entity_changes(old: Entities, new: Entities, release: str) -> tuple[list[str], list[str]]:
    """(reasons for a restart, reasons for a reconfigure) from nodes, partitions and the like."""
    restart, reconfigure = [], []
    nodes_by_reconfigure = _release_at_least(release, NODES_BY_RECONFIGURE_FROM)
    for kind, name in sorted(set(old) | set(new)):
        before, after = old.get((kind, name)), new.get((kind, name))
        if before == after:
            continue
        label = _label(kind, name)
        if before is None or after is None:
            line = f"{label} {'added' if before is None else 'removed'}"
            node = kind == "nodename" and name.lower() != "default"
            (restart if node and not nodes_by_reconfigure else reconfigure).append(line)
            continue
        for key in sorted(set(before) | set(after)):
            if before.get(key) == after.get(key):
                continue
            line = f"{label}: {key} changed ({_show(before.get(key))} -> {_show(after.get(key))})"
            hardware = kind == "nodename" and key in NODE_RESTART_KEYS
            (restart if hardware else reconfigure).append(line)
    return restart, reconfigure


def _joined(files: dict[str, Any], names: list[str]) -> str:
    return "\n".join(str(files.get(name) or "") for name in names)


def slurm_conf_change(
    old: dict[str, Any], new: dict[str, Any], release: str = ""
) -> dict[str, Any]:
    """What the running daemons need to apply the change from `old` to `new` files."""
    conf_names = sorted(name for name in set(old) | set(new) if name not in SLURMD_FILES)
    old_settings, old_entities = parse_slurm_conf(_joined(old, conf_names))
    new_settings, new_entities = parse_slurm_conf(_joined(new, conf_names))
    restart_both, reconfigure = _setting_changes(old_settings, new_settings)
    entity_restart, entity_reconfigure = _entity_changes(old_entities, new_entities, release)
    restart_both += entity_restart
    reconfigure += entity_reconfigure
    restart_slurmd = [
        f"{name} changed (slurmd reads it at its start)"
        for name in SLURMD_FILES
        if _logical_lines(str(old.get(name) or "")) != _logical_lines(str(new.get(name) or ""))
    ]
    daemons = BOTH if restart_both else SLURMD if restart_slurmd else ()
    # A slurmctld restart reads every key anew; a slurmd-only restart leaves slurmctld's part.
    needs_reconfigure = bool(reconfigure) and "slurmctld" not in daemons
    action = "restart" if daemons else "reconfigure" if reconfigure else "none"
    return {
        "action": action,
        "restart": list(daemons),
        "reconfigure": needs_reconfigure,
        "reasons": restart_both + restart_slurmd + reconfigure,
    }


class FilterModule:
    """gpulab.cluster's Slurm configuration change filter."""

    def filters(self) -> dict[str, Any]:
        return {"slurm_conf_change": slurm_conf_change}
