#!/usr/bin/python
# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Ansible module gpulab.cluster.slurm_info: Slurm's nodes, partitions and jobs, read only."""

# Ansible modules import after DOCUMENTATION, EXAMPLES and RETURN.
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_info
short_description: Read Slurm's nodes, partitions and jobs
description:
  - Reads every node's state, reason, GRES, features and partitions (C(sinfo --Node)), every
    partition (C(sinfo)) and the jobs in the queue (C(squeue)), and changes nothing.
  - Each node carries C(healthy), gpulab's one definition of a node in service (idle, mixed,
    allocated or completing, its slurmd answering, no drain flag), and C(unavailable) (down,
    drained, draining or failed, so that it takes no new jobs until resumed).
  - Runs on a host with the Slurm client commands and a readable slurm.conf, usually the controller.
version_added: "2.1.0"
author: gpulab contributors (@gpulab)
options:
  gather:
    description: What to read.
    type: list
    elements: str
    choices: [nodes, partitions, jobs]
    default: [nodes, partitions, jobs]
  nodes:
    description:
      - Only these nodes (C(sinfo --nodes)), and only the jobs that run on them
        (C(squeue --nodelist)); default every node and job.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Runs in check mode, reading as it does otherwise.
    support: full
    details: Reads only, so check mode changes nothing of what it does.
  diff_mode:
    description: Shows in diff mode what changed.
    support: none
requirements:
  - Slurm client commands (sinfo, squeue) on the managed host.
seealso:
  - module: gpulab.cluster.slurm_node
  - module: gpulab.cluster.slurm_job
"""

EXAMPLES = r"""
- name: Read the cluster
  gpulab.cluster.slurm_info:
  register: cluster

- name: Fail when a worker is out of service
  ansible.builtin.assert:
    that: cluster.nodes | rejectattr('healthy') | list | length == 0
    fail_msg: "{{ cluster.nodes | rejectattr('healthy') | map(attribute='name') | join(', ') }}"

- name: Wait until worker1 runs no job
  gpulab.cluster.slurm_info:
    gather: [jobs]
    nodes: [worker1]
  register: worker1
  until: worker1.jobs | length == 0
  retries: 60
  delay: 5
"""

RETURN = r"""
nodes:
  description: The nodes, each once (with all its partitions).
  returned: when O(gather) has V(nodes)
  type: list
  elements: dict
  contains:
    name:
      description: The NodeName.
      type: str
      sample: worker1
    state:
      description: The base state in lower case, without flags.
      type: str
      sample: idle
    long_state:
      description: The state as C(sinfo %T) writes it, with its flags
        (C(*) not responding, C(+drain), ...).
      type: str
      sample: "down*"
    responding:
      description: Whether slurmctld hears from the node's slurmd.
      type: bool
    healthy:
      description: In service, gpulab's one definition
        (idle, mixed, allocated or completing; responding; no drain flag).
      type: bool
    unavailable:
      description: Down, drained, draining or failed.
      type: bool
    drained:
      description: Drained or draining.
      type: bool
    reason:
      description: Why the node is down or drained; "" for none.
      type: str
      sample: "gpulab-health: device lost (device 0)"
    reason_user:
      description: Who set the reason (C(slurm) when slurmctld did); "" for none.
      type: str
      sample: root
    gres:
      description: The node's GRES as sinfo writes them; "" for none.
      type: str
      sample: "gpu:h200:1"
    features:
      description: The node's features.
      type: list
      elements: str
      sample: [vulkan, lavapipe]
    partitions:
      description: The partitions the node is in.
      type: list
      elements: str
      sample: [main]
  sample:
    - {name: worker1, state: idle, long_state: idle, responding: true, healthy: true,
       unavailable: false, drained: false, reason: "", reason_user: "", gres: "gpu:1",
       features: [vulkan], partitions: [main]}
partitions:
  description: The partitions.
  returned: when O(gather) has V(partitions)
  type: list
  elements: dict
  contains:
    name:
      description: The partition's name.
      type: str
      sample: main
    default:
      description: Whether it is the default partition.
      type: bool
    available:
      description: Whether it is up.
      type: bool
    time_limit:
      description: Its time limit as Slurm writes it.
      type: str
      sample: infinite
    node_count:
      description: How many nodes it has.
      type: int
      sample: 2
    nodes:
      description: Its nodes in Slurm's hostlist form.
      type: list
      elements: str
      sample: ["worker[1-2]"]
jobs:
  description: Everybody's jobs in the queue (pending, running, completing; ended ones for
    a while after).
  returned: when O(gather) has V(jobs)
  type: list
  elements: dict
  contains:
    job_id:
      description: The job id (C(ID_TASK) for an array task).
      type: str
      sample: "42"
    state:
      description: Its state.
      type: str
      sample: RUNNING
    partition:
      description: Its partition.
      type: str
      sample: main
    user:
      description: Its owner.
      type: str
      sample: gpulab
    node_count:
      description: How many nodes it has or asks for.
      type: int
      sample: 1
    nodes:
      description: The nodes it runs on; "" while pending.
      type: str
      sample: worker1
    reason:
      description: Why it waits; "" for none.
      type: str
      sample: Resources
    name:
      description: Its name.
      type: str
      sample: gpulab-validate
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_client import (
    SlurmClient,
    SlurmError,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import (
    Runner,
    SlurmRunner,
)

GATHER = ["nodes", "partitions", "jobs"]
ARGUMENT_SPEC: dict[str, Any] = {
    "gather": {"type": "list", "elements": "str", "choices": GATHER, "default": GATHER},
    "nodes": {"type": "list", "elements": "str", "default": []},
}
MODULE_KWARGS: dict[str, Any] = {"supports_check_mode": True}


def read(params: dict[str, Any], runner: Runner) -> dict[str, Any]:
    """What the module returns; SlurmError when a command fails or prints no such list."""
    client = SlurmClient(runner.run, runner.which)
    result: dict[str, Any] = {"changed": False}
    if "nodes" in params["gather"]:
        result["nodes"] = [node.as_dict() for node in client.nodes(params["nodes"])]
    if "partitions" in params["gather"]:
        result["partitions"] = [partition.as_dict() for partition in client.partitions()]
    if "jobs" in params["gather"]:
        result["jobs"] = [job.as_dict() for job in client.jobs(params["nodes"])]
    return result


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, **MODULE_KWARGS)
    try:
        result = read(module.params, SlurmRunner(module))
    except SlurmError as error:
        extra = (
            {"cmd": list(error.result.argv), "rc": error.result.returncode} if error.result else {}
        )
        module.fail_json(msg=str(error), **extra)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
