# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Filter gpulab.cluster.slurm_gpus: the number of GPUs in a Slurm GRES string."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_client import gres_gpu_count

DOCUMENTATION = r"""
---
name: slurm_gpus
short_description: The number of GPUs in a Slurm GRES string
description:
  - Counts the C(gpu) items of a GRES string as C(sinfo %G), C(scontrol show node) or
    C(scontrol show job -d) print it; 0 for none or C((null)).
version_added: "1.0.0"
author: gpulab contributors (@gpulab)
options:
  _input:
    description: The GRES string, e.g. C(gpu:h200:2(S:0-1)) or C(gpu:1,mps:100).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Ask for one GPU on nodes that have some
  ansible.builtin.debug:
    msg: "{{ 'gpu:1' if ('gpu:orin:1' | gpulab.cluster.slurm_gpus) > 0 else 'none' }}"
"""

RETURN = r"""
_value:
  description: The number of GPUs.
  type: int
"""


class FilterModule:
    """gpulab.cluster's GRES filter."""

    def filters(self) -> dict[str, Any]:
        return {"slurm_gpus": gres_gpu_count}
