# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""The GPUs Slurm gave a job, as its environment names them: the one reader of those variables.

Slurm writes the allocated GPUs' global ids into SLURM_STEP_GPUS (in a step) and SLURM_JOB_GPUS
(in the batch script); a global id is the number that ends the GPU's gres.conf `File=`.
CUDA_VISIBLE_DEVICES and GPU_DEVICE_ORDINAL are not used: under ConstrainDevices they count from
0 inside the job. A job given shards of a GPU (`--gres=shard:N`, Slurm 22.05+) has
SLURM_SHARDS_ON_NODE, and Slurm may or may not name the GPU's id in the variables above.

This file, the collection's module_utils, serves the validation filter (the GRES a recorded
job was given) and is also the payload's gpulab.placement.slurm_gpu_env (a link here, resolved
when the wheel is built), which gpulab.placement.slurm_gpus reads a job's allocation with. So it
uses the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

ID_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
"""Where Slurm writes the allocated GPUs' global ids, the step's first."""
SHARDS_VARIABLE = "SLURM_SHARDS_ON_NODE"
"""How many shards of a GPU the job has on this node (gres/shard plugin)."""


def id_variable(env: Mapping[str, str]) -> str | None:
    """The first of ID_VARIABLES that `env` sets to something; None outside a job given GPUs."""
    return next((name for name in ID_VARIABLES if env.get(name, "").strip()), None)


def parse_ids(value: str) -> tuple[int, ...] | None:
    """The GPU ids of a variable's value (`0,2`); None when it names none (Slurm writes
    NoDevFiles when gres.conf gives the GPUs no File=)."""
    try:
        return tuple(int(item) for item in value.split(","))
    except ValueError:
        return None


def shards_given(env: Mapping[str, str]) -> int | None:
    """SLURM_SHARDS_ON_NODE when it counts shards (above 0); None for a job without any."""
    text = env.get(SHARDS_VARIABLE, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None
