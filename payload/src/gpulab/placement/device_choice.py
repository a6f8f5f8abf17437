"""Which Vulkan device a run uses: `--device N`, else the GPU Slurm gave the job, else device 0.

Inside a job given GPUs (`--gres=gpu:N`) or shards of one (`--gres=shard:N`), device 0 of the
loader's order may be another job's GPU: the allocation's gres.conf files are matched to Vulkan
devices (see gpu_files) and the first that matches is used. Every choice says what made it, for
the result JSON.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpulab.placement.slurm_gpu_env import id_variable, shards_given
from gpulab.vk import DeviceInfo, VulkanError, shared_instance

if TYPE_CHECKING:
    from gpulab.placement.gpu_files import FileMatch, HostFiles
    from gpulab.placement.slurm_gpus import SlurmGpus


@dataclass(frozen=True)
class DeviceChoice:
    """The device index to use, why, and what the Slurm allocation (if any) maps to."""

    index: int
    chosen_by: str
    infos: tuple[DeviceInfo, ...]
    """Every Vulkan device here (empty without a loader or driver)."""
    allocation: SlurmGpus | None = None
    matches: tuple[FileMatch, ...] = ()
    """The allocation's files, each with its Vulkan device (or why none)."""
    warning: str | None = None
    """Set when an explicit --device lies outside the allocation."""
    requested: int | None = None
    """The --device asked for (None: chosen by default)."""
    slurm_job: str | None = None
    """The Slurm job this runs in (SLURM_JOB_ID), None outside Slurm."""

    @property
    def allocated(self) -> tuple[int, ...]:
        """The Vulkan devices the allocation maps to, in its order."""
        return tuple(dict.fromkeys(m.device for m in self.matches if m.device is not None))

    @property
    def name(self) -> str | None:
        """The chosen device's name; None when there is no such device."""
        return self.infos[self.index].name if self.index < len(self.infos) else None

    def chosen_by_for(self, index: int) -> str:
        """What picked device `index`: the allocation file that maps to it, else `chosen_by`."""
        allocation = self.allocation
        if allocation is not None and not self.chosen_by.startswith("--device"):
            for match in self.matches:
                if match.device == index:
                    where = f"{allocation.kind} {match.file}"
                    return f"slurm {where} ({allocation.origin}; {match.how})"
        return self.chosen_by

    def slurm_json(self) -> dict[str, Any] | None:
        """The result's `slurm.gpus`: the allocation and the device each of its files maps to."""
        if self.allocation is None:
            return None
        devices = [{"file": m.file, "device": m.device, "how": m.how} for m in self.matches]
        return self.allocation.to_json() | {"devices": devices}


def vulkan_infos() -> tuple[DeviceInfo, ...]:
    """The Vulkan devices here (none when there is no loader or driver)."""
    try:
        return tuple(device.info for device in shared_instance().physical_devices())
    except (VulkanError, OSError):
        return ()


def _default_reason(allocation: SlurmGpus | None, matches: Sequence[FileMatch]) -> str:
    if allocation is None:
        return "default (no GPUs allocated by Slurm)"
    why = "; ".join(f"{m.file}: {m.how}" for m in matches)
    if allocation.problem:
        why = f"{why}; {allocation.problem}" if why else allocation.problem
    # A shard job stays on a GPU shared with other jobs even when it maps to nothing: say so.
    given = (
        allocation.origin if allocation.shards is None else f"the shards' GPU ({allocation.origin})"
    )
    return f"default: {given} maps to no Vulkan device here ({why})"


def read_slurm_allocation(env: Mapping[str, str]) -> SlurmGpus | None:
    """slurm_gpus.read_allocation(env), whose readers (and gres.conf's matching, gpu_files) are
    imported only inside a job given GPUs or shards: a run elsewhere starts without them."""
    if id_variable(env) is None and shards_given(env) is None:
        return None
    from gpulab.placement.slurm_gpus import read_allocation  # noqa: PLC0415

    return read_allocation(env)


def decide(
    requested: int | None,
    infos: Sequence[DeviceInfo],
    allocation: SlurmGpus | None,
    host: HostFiles | None = None,
    slurm_job: str | None = None,
) -> DeviceChoice:
    """The choice for `requested` (None: the default) among `infos` under `allocation` (its
    files looked up in `host`, by default this host's), in Slurm job `slurm_job` (None: outside
    Slurm)."""
    files = allocation.files if allocation is not None else ()
    matches: tuple[FileMatch, ...] = ()
    if files:
        from gpulab.placement.gpu_files import HostFiles, match_file  # noqa: PLC0415

        host = host or HostFiles()
        matches = tuple(match_file(file, infos, host) for file in files)
    found = DeviceChoice(0, "", tuple(infos), allocation, matches, slurm_job=slurm_job)
    if requested is not None:
        warning = None
        if allocation is not None and found.allocated and requested not in found.allocated:
            warning = (
                f"--device {requested} is not a GPU Slurm allocated to this job "
                f"({allocation.origin} is Vulkan device {', '.join(map(str, found.allocated))})"
            )
        return replace(
            found,
            index=requested,
            chosen_by=f"--device {requested}",
            warning=warning,
            requested=requested,
        )
    if found.allocated:
        first = found.allocated[0]
        return replace(found, index=first, chosen_by=found.chosen_by_for(first))
    return replace(found, chosen_by=_default_reason(allocation, matches))


def choose_device(
    requested: int | None, env: Mapping[str, str] | None = None, host: HostFiles | None = None
) -> DeviceChoice:
    """The device a run uses here: `requested`, else Slurm's GPU, else device 0."""
    env = os.environ if env is None else env
    allocation = read_slurm_allocation(env)
    job = env.get("SLURM_JOB_ID") or None
    return decide(requested, vulkan_infos(), allocation, host, job)
