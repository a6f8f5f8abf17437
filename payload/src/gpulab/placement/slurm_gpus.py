"""The GPUs Slurm gave this job: their ids from the environment, their files from gres.conf.

The environment is read by slurm_gpu_env (shared with the collection): the allocated GPUs'
global ids in SLURM_STEP_GPUS or SLURM_JOB_GPUS, and SLURM_SHARDS_ON_NODE. A global id is the
number that ends the GPU's gres.conf `File=` (/dev/nvidia3 is 3, /dev/dri/renderD129 is 129);
files without one are numbered after the largest, in gres.conf order (slurmd's
common_node_config_load). This is gpulab's one reader of gres.conf and of Slurm's hostlists.

A job given shards of a GPU (`--gres=shard:N`, Slurm 22.05+) shares that GPU with other jobs;
without a GPU id in the environment, the GPU's file comes from this node's `Name=shard` lines
of gres.conf.

Everything here is pure: it reads the environment and gres.conf text it is given.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpulab.placement.slurm_gpu_env import (
    SHARDS_VARIABLE,
    id_variable,
    parse_ids,
    shards_given,
)

DEFAULT_CONF_DIR = Path("/etc/slurm")

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TRAILING_NUMBER = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class GresGpu:
    """One GPU of this node's gres.conf: its Slurm global id, device file and type."""

    id: int
    file: str
    type: str | None


@dataclass(frozen=True)
class SlurmGpus:
    """The job's GPUs: the variable that named them, their ids, and the files found for them."""

    variable: str
    value: str
    ids: tuple[int, ...]
    files: tuple[str, ...]
    """The gres.conf files of `ids`, in the same order (only those found)."""
    gres_conf: str
    problem: str | None = None
    """Why some id has no file (or the ids could not be read); None when every id has one."""
    shards: int | None = None
    """SLURM_SHARDS_ON_NODE when the job was given shards of a GPU, else None."""

    @property
    def kind(self) -> str:
        """`gres` for GPUs of the job's own, `shard` for a GPU shared with other jobs."""
        return "gres" if self.shards is None else "shard"

    @property
    def origin(self) -> str:
        """`SLURM_JOB_GPUS=0,1`: where the ids (or the shards) came from, for messages."""
        named = f"{self.variable}={self.value}"
        if self.shards is None:
            return named
        shared = f"{SHARDS_VARIABLE}={self.shards}, a GPU shared with other jobs"
        return shared if self.variable == SHARDS_VARIABLE else f"{shared}, {named}"

    def to_json(self) -> dict[str, Any]:
        """The JSON under the result's `slurm.gpus`."""
        document: dict[str, Any] = {
            "variable": self.variable,
            "ids": list(self.ids),
            "files": list(self.files),
            "gres_conf": self.gres_conf,
        }
        if self.shards is not None:
            document["shards"] = self.shards
        return document | ({"problem": self.problem} if self.problem else {})


def _split_top_level(text: str) -> Iterator[str]:
    """Split at commas outside brackets: `a[1,2],b` -> `a[1,2]`, `b`."""
    depth, start = 0, 0
    for position, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            yield text[start:position]
            start = position + 1
    yield text[start:]


def _bracket_values(body: str, where: str) -> list[str]:
    values = []
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise ValueError(f"cannot expand {where!r}: [{body}] is not a list of numbers")
        low, high = match[1], match[2] or match[1]
        values += [str(n).zfill(len(low)) for n in range(int(low), int(high) + 1)]
    return values


def expand_hostlist(text: str) -> list[str]:
    """Expand Slurm's hostlist syntax (`/dev/nvidia[0-3]`, `node[01-02,7],gpu1`) in order."""
    names: list[str] = []
    for item in _split_top_level(text.strip()):
        if not item:
            continue
        pieces = re.split(r"\[([^\[\]]*)\]", item)  # odd positions: bracket bodies
        if any("[" in piece or "]" in piece for piece in pieces[::2]):
            raise ValueError(f"cannot expand {text!r}: unbalanced brackets")
        choices = [
            _bracket_values(piece, text) if position % 2 else [piece]
            for position, piece in enumerate(pieces)
        ]
        names += ["".join(combination) for combination in itertools.product(*choices)]
    return names


def _settings(line: str) -> dict[str, str]:
    """`Key=value` pairs of one gres.conf line, keys lowercased (Slurm ignores their case)."""
    settings = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            settings[key.lower()] = value.strip("\"'")
    return settings


def parse_gres_conf(text: str, node: str, name: str = "gpu") -> list[GresGpu]:
    """The `Name=<name>` devices of `node` with their Slurm global ids, in gres.conf order.

    Lines with a NodeName apply to the nodes it names; lines without one apply to every node.
    """
    files: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        settings = _settings(line.split("#", 1)[0])
        if settings.get("name") != name or "file" not in settings:
            continue
        if "nodename" in settings and node not in expand_hostlist(settings["nodename"]):
            continue
        files += [(file, settings.get("type")) for file in expand_hostlist(settings["file"])]
    numbers = [_TRAILING_NUMBER.search(file) for file, _ in files]
    largest = max((int(n[1]) for n in numbers if n), default=-1)
    gpus = []
    for (file, gres_type), number in zip(files, numbers, strict=True):
        if number is None:
            largest += 1
        gpus.append(GresGpu(int(number[1]) if number else largest, file, gres_type))
    return gpus


def gres_conf_path(env: Mapping[str, str]) -> Path:
    """gres.conf lies beside slurm.conf: $SLURM_CONF's folder, else /etc/slurm."""
    slurm_conf = env.get("SLURM_CONF")
    return (Path(slurm_conf).parent if slurm_conf else DEFAULT_CONF_DIR) / "gres.conf"


def node_name(env: Mapping[str, str]) -> str:
    """This node's Slurm name: $SLURMD_NODENAME in a job, else the short host name."""
    return env.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]


class _Unusable(Exception):
    """gres.conf cannot be read or parsed; the message says why."""


def _node_devices(
    env: Mapping[str, str], read_text: Callable[[Path], str], names: tuple[str, ...]
) -> list[GresGpu]:
    """This node's gres.conf devices of each name in `names`, in that order."""
    path = gres_conf_path(env)
    try:
        text = read_text(path)
        return [gpu for name in names for gpu in parse_gres_conf(text, node_name(env), name)]
    except OSError as exc:
        raise _Unusable(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _Unusable(f"{path}: {exc}") from None


def _from_ids(
    env: Mapping[str, str],
    variable: str,
    read_text: Callable[[Path], str],
    shards: int | None,
) -> SlurmGpus:
    """The files of the GPU ids in `variable`, from gres.conf's gpu (and for shards, shard)
    lines; a gpu line wins over a shard line naming the same id."""
    value = env[variable].strip()
    path = gres_conf_path(env)
    found = SlurmGpus(variable, value, (), (), str(path), shards=shards)
    ids = parse_ids(value)
    if ids is None:
        why = f"{variable}={value} names no GPU ids (gres.conf gives the GPUs no File=)"
        return replace(found, problem=why)
    names = ("gpu",) if shards is None else ("shard", "gpu")
    try:
        devices = _node_devices(env, read_text, names)
    except _Unusable as exc:
        return replace(found, ids=ids, problem=str(exc))
    by_id = {gpu.id: gpu.file for gpu in devices}
    missing = [str(i) for i in ids if i not in by_id]
    problem = (
        f"{path} has no {' or '.join(reversed(names))} File= with id {', '.join(missing)} "
        f"for node {node_name(env)}"
        if missing
        else None
    )
    files = tuple(by_id[i] for i in ids if i in by_id)
    return replace(found, ids=ids, files=files, problem=problem)


def _from_shard_lines(
    env: Mapping[str, str], read_text: Callable[[Path], str], shards: int
) -> SlurmGpus:
    """The files of this node's `Name=shard` lines, for a job given shards but no GPU id."""
    path = gres_conf_path(env)
    found = SlurmGpus(SHARDS_VARIABLE, str(shards), (), (), str(path), shards=shards)
    try:
        devices = _node_devices(env, read_text, ("shard",))
    except _Unusable as exc:
        return replace(found, problem=str(exc))
    # Several GPUs with shards and no id to say which is the job's: keep them all, in order.
    # Under ConstrainDevices the job can open only its own GPU, so only that one is a Vulkan
    # device here and matching the files to devices picks it.
    files = tuple(dict.fromkeys(gpu.file for gpu in devices))
    problem = None if files else f"{path} has no shard File= for node {node_name(env)}"
    return replace(found, files=files, problem=problem)


def read_allocation(
    env: Mapping[str, str], read_text: Callable[[Path], str] = Path.read_text
) -> SlurmGpus | None:
    """The job's GPUs (or the GPU its shards are on) and their gres.conf files; None outside
    a job that was given GPUs or shards."""
    variable = id_variable(env)
    shards = shards_given(env)
    if shards is None:
        return None if variable is None else _from_ids(env, variable, read_text, None)
    if variable is not None and parse_ids(env[variable].strip()) is not None:
        return _from_ids(env, variable, read_text, shards)
    return _from_shard_lines(env, read_text, shards)
