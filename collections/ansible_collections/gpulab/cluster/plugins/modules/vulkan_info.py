#!/usr/bin/python
# Copyright: gpulab contributors
# MIT License (see galaxy.yml)
"""Ansible module gpulab.cluster.vulkan_info: the host's Vulkan devices as facts."""

# Ansible modules import after DOCUMENTATION, EXAMPLES and RETURN.
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vulkan_info
short_description: Report the host's Vulkan devices as facts
description:
  - Runs C(vulkaninfo --summary) (from vulkan-tools) and returns each Vulkan device it lists
    as the fact C(gpulab_vulkan_devices).
  - Each GPU gets the device file a job needs to use it (C(/dev/nvidiaN) for NVIDIA's driver,
    a C(/dev/dri/renderD*) node otherwise), matched in enumeration order; CPU devices such as
    lavapipe have none.
  - Reports absent (an empty list and a RV(reason)), never a failure, when vulkaninfo,
    the Vulkan loader or any driver is missing.
  - Changes nothing, so it runs in check mode too.
version_added: "1.0.0"
author: gpulab
options:
  vulkaninfo:
    description: The vulkaninfo command; a name is looked up on PATH.
    type: str
    default: vulkaninfo
  dev_dir:
    description: Where the device nodes live.
    type: path
    default: /dev
attributes:
  check_mode:
    support: full
  facts:
    support: full
"""

EXAMPLES = r"""
- name: Read the Vulkan devices
  gpulab.cluster.vulkan_info:

- name: Show the GPUs that Slurm can hand out
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpulab_vulkan_devices | selectattr('device_files') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added for the host.
  returned: always
  type: dict
  contains:
    gpulab_vulkan_devices:
      description: The Vulkan devices, in the loader's order; empty when Vulkan is absent.
      type: list
      elements: dict
      contains:
        index: {description: Position in the loader's list (vulkaninfo's GPUn)., type: int}
        name: {description: deviceName., type: str, sample: "llvmpipe (LLVM 15.0.6, 256 bits)"}
        type: {description: "discrete, integrated, virtual, cpu or other.", type: str, sample: cpu}
        driver: {description: driverName., type: str, sample: llvmpipe}
        driver_id: {description: driverID., type: str, sample: DRIVER_ID_MESA_LLVMPIPE}
        driver_info: {description: driverInfo., type: str, sample: "Mesa 22.3.6 (LLVM 15.0.6)"}
        api_version: {description: Vulkan API version of the device., type: str, sample: 1.3.230}
        vendor_id: {description: PCI vendor (or Khronos vendor) id., type: str, sample: "0x10005"}
        device_id: {description: Device id., type: str, sample: "0x0000"}
        device_files:
          description: Device nodes a job needs for this device; empty for CPU devices.
          type: list
          elements: str
          sample: [/dev/nvidia0]
    gpulab_vulkan_present:
      description: Whether vulkaninfo found at least one device.
      type: bool
reason:
  description: Why no devices were found; empty when some were.
  returned: always
  type: str
  sample: vulkaninfo is not installed (package vulkan-tools)
"""

import glob
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import (
    Runner,
    SlurmRunner,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.vulkan_devices import (
    assign_device_files,
    parse_summary,
)

ARGUMENT_SPEC: dict[str, Any] = {
    "vulkaninfo": {"type": "str", "default": "vulkaninfo"},
    "dev_dir": {"type": "path", "default": "/dev"},
}


def device_nodes(dev_dir: str) -> list[str]:
    """The GPU device nodes under dev_dir, named as under /dev."""
    found = glob.glob(os.path.join(dev_dir, "nvidia[0-9]*")) + glob.glob(
        os.path.join(dev_dir, "dri", "renderD*")
    )
    return ["/dev/" + os.path.relpath(path, dev_dir) for path in found]


def probe(params: dict[str, Any], runner: Runner, nodes: list[str]) -> dict[str, Any]:
    """The module's result: facts, and the reason when there are no devices."""
    devices: list[dict[str, Any]] = []
    reason = ""
    command = runner.which(params["vulkaninfo"])
    if command is None:
        reason = f"{params['vulkaninfo']} is not installed (package vulkan-tools)"
    else:
        result = runner.run([command, "--summary"])
        if result.rc != 0:
            last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
            reason = f"vulkaninfo exited {result.rc} (no loader or driver?): {last[0]}"
        else:
            devices = parse_summary(result.stdout)
            assign_device_files(devices, nodes)
            reason = "" if devices else "vulkaninfo lists no devices (no Vulkan driver installed?)"
    return {
        "changed": False,
        "reason": reason,
        "ansible_facts": {
            "gpulab_vulkan_devices": devices,
            "gpulab_vulkan_present": bool(devices),
        },
    }


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(
        **probe(module.params, SlurmRunner(module), device_nodes(module.params["dev_dir"]))
    )


if __name__ == "__main__":
    main()
