#!/usr/bin/python
# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Ansible module gpulab.cluster.slurm_node: drain or resume Slurm nodes, or reconfigure Slurm."""

# Ansible modules import after DOCUMENTATION, EXAMPLES and RETURN.
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_node
short_description: Drain or resume Slurm nodes, or have Slurm read its configuration again
description:
  - O(state=drained) drains the nodes with O(reason) (C(scontrol update state=drain)); running
    jobs finish, no new job starts. A node already drained with this reason is left as it is;
    one drained with another reason gets this one, unless O(keep_reason=true).
  - O(state=resumed) resumes those of the nodes that are down, drained, draining or failed
    (C(scontrol update state=resume)); nodes in service are left as they are.
  - O(state=reconfigured) has slurmctld and every slurmd read slurm.conf again
    (C(scontrol reconfigure)). It is an action, not a state; it runs, and reports a change,
    every time, so call it from a handler.
  - Reads the nodes first (C(sinfo --Node)), so that only what differs changes.
  - Runs on a host with the Slurm client commands and a readable slurm.conf, usually the controller.
version_added: "2.1.0"
author: gpulab contributors (@gpulab)
options:
  name:
    description: The nodes (NodeName), for O(state=drained) and O(state=resumed).
    type: list
    elements: str
    aliases: [nodes]
    default: []
  state:
    description: What to do.
    type: str
    choices: [drained, resumed, reconfigured]
    required: true
  reason:
    description: Why the nodes are drained (C(reason=)), one line; needed with O(state=drained).
    type: str
  keep_reason:
    description: With O(state=drained), leave a node that is drained already with another
      reason (a person's, a health check's) as it is.
    type: bool
    default: false
attributes:
  check_mode:
    description: Runs in check mode, predicting the change and making none.
    support: full
    details: Reads the nodes, reports what would change and runs no C(scontrol update) or
      C(scontrol reconfigure).
  diff_mode:
    description: Shows in diff mode each node's drain and reason before and after.
    support: full
requirements:
  - Slurm client commands (sinfo, scontrol) on the managed host.
seealso:
  - module: gpulab.cluster.slurm_info
  - module: gpulab.cluster.slurm_job
"""

EXAMPLES = r"""
- name: Drain worker1 for its upgrade
  gpulab.cluster.slurm_node:
    name: worker1
    state: drained
    reason: gpulab upgrade

- name: Resume it
  gpulab.cluster.slurm_node:
    name: worker1
    state: resumed

- name: Reconfigure Slurm
  gpulab.cluster.slurm_node:
    state: reconfigured
"""

RETURN = r"""
changed_nodes:
  description: The nodes drained or resumed (or that would be in check mode).
  returned: state is drained or resumed
  type: list
  elements: str
  sample: [worker1]
cmd:
  description: The scontrol command run (or that would run in check mode); absent when nothing
    had to change.
  returned: when something changed
  type: list
  elements: str
  sample: [/usr/bin/scontrol, update, nodename=worker1, state=drain, "reason=gpulab upgrade"]
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_client import (
    NodeState,
    SlurmClient,
    SlurmError,
    scontrol_reconfigure_argv,
    scontrol_update_nodes_argv,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import (
    Runner,
    SlurmRunner,
)

ARGUMENT_SPEC: dict[str, Any] = {
    "name": {"type": "list", "elements": "str", "aliases": ["nodes"], "default": []},
    "state": {"type": "str", "choices": ["drained", "resumed", "reconfigured"], "required": True},
    "reason": {"type": "str"},
    "keep_reason": {"type": "bool", "default": False},
}
MODULE_KWARGS: dict[str, Any] = {
    "required_if": [("state", "drained", ("reason",))],
    "supports_check_mode": True,
}


class SlurmNodeError(Exception):
    """A failure to report with fail_json, in one line."""


def problems(params: dict[str, Any]) -> str | None:
    """What the argument spec cannot say, in one line; None when the arguments hold."""
    if params["state"] != "reconfigured" and not params["name"]:
        return f"state={params['state']} needs name: the nodes to change"
    if params["state"] == "reconfigured" and params["name"]:
        return "state=reconfigured reconfigures the whole cluster: leave name out"
    reason = params["reason"]
    if reason is not None and params["state"] != "drained":
        return f"reason is for state=drained, not state={params['state']}"
    if reason is not None and (not reason.strip() or "\n" in reason):
        return "reason must be one line of text"
    return None


def _view(node: NodeState) -> dict[str, Any]:
    return {"drained": node.drained, "unavailable": node.unavailable, "reason": node.reason}


class SlurmNode:
    """What the module does, with the runner passed in."""

    def __init__(self, params: dict[str, Any], runner: Runner, check_mode: bool = False) -> None:
        self.params = params
        self.check_mode = check_mode
        self.client = SlurmClient(runner.run, runner.which)

    def apply(self) -> dict[str, Any]:
        problem = problems(self.params)
        if problem is not None:
            raise SlurmNodeError(problem)
        if self.params["state"] == "reconfigured":
            argv = self.client.resolve(scontrol_reconfigure_argv())
            if not self.check_mode:
                self.client.check(argv)
            return {"changed": True, "cmd": argv}
        nodes = self.read()
        if self.params["state"] == "drained":
            targets = [node for node in nodes if self.needs_drain(node)]
            after = {"drained": True, "unavailable": True, "reason": self.params["reason"]}
            state, reason = "drain", self.params["reason"]
        else:
            targets = [node for node in nodes if node.unavailable]
            after = {"drained": False, "unavailable": False, "reason": ""}
            state, reason = "resume", None
        names = [node.node for node in targets]
        result: dict[str, Any] = {
            "changed": bool(targets),
            "changed_nodes": names,
            "diff": {
                "before": {node.node: _view(node) for node in targets},
                "after": dict.fromkeys(names, after),
            },
        }
        if targets:
            result["cmd"] = self.client.resolve(scontrol_update_nodes_argv(names, state, reason))
            if not self.check_mode:
                self.client.check(result["cmd"])
        return result

    def read(self) -> list[NodeState]:
        """The named nodes; SlurmNodeError naming those Slurm does not know."""
        nodes = self.client.nodes(self.params["name"])
        known = {node.node for node in nodes}
        unknown = [name for name in self.params["name"] if name not in known]
        if unknown:
            raise SlurmNodeError(f"Slurm has no node {', '.join(unknown)}")
        return nodes

    def needs_drain(self, node: NodeState) -> bool:
        if not node.drained:
            return True
        return node.reason != self.params["reason"] and not self.params["keep_reason"]


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, **MODULE_KWARGS)
    try:
        result = SlurmNode(module.params, SlurmRunner(module), module.check_mode).apply()
    except SlurmNodeError as error:
        module.fail_json(msg=str(error))
    except SlurmError as error:
        extra = (
            {"cmd": list(error.result.argv), "rc": error.result.returncode} if error.result else {}
        )
        module.fail_json(msg=str(error), **extra)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
