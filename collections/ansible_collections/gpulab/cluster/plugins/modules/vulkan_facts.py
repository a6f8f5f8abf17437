#!/usr/bin/python
# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Ansible module gpulab.cluster.vulkan_facts: the host's Vulkan devices as facts.

A `_facts` module, as Ansible names them: it returns `ansible_facts` about the host it runs on
(an `_info` module would return data for `register` instead). Its first name,
gpulab.cluster.vulkan_info, still runs it: meta/runtime.yml redirects that name here.
"""

# Ansible modules import after DOCUMENTATION, EXAMPLES and RETURN.
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vulkan_facts
short_description: Gather the host's Vulkan devices as facts
description:
  - Runs C(vulkaninfo --summary) (from vulkan-tools) and sets the fact C(gpulab_vulkan_devices)
    to each Vulkan device it lists; then C(vulkaninfo) for the full text, which alone tells
    the subgroup size and shaderFloat64 behind each device's C(features).
  - A facts module - its result is C(ansible_facts) that update the host's facts, so later
    tasks and roles read C(ansible_facts.gpulab_vulkan_devices) with no C(register).
  - Each GPU gets the device files a job needs to use it and the one of them that stands
    for it in Slurm's gres.conf, that is C(/dev/nvidiaN) plus the shared C(/dev/nvidiactl),
    C(/dev/nvidia-uvm), ... for NVIDIA's discrete GPUs (paired by GPU UUID through the
    driver's O(nvidia_gpus_dir), as the gpulab payload pairs them in a job; in enumeration
    order where that is not visible); C(/dev/nvmap), C(/dev/nvhost-*) and C(/dev/nvgpu/igpu0/*)
    for the integrated GPU of an L4T (Jetson) host, standing for it C(/dev/nvgpu/igpu0/ctrl),
    or C(/dev/nvhost-ctrl-gpu) before L4T r36; a C(/dev/dri/renderD*) node for any other GPU.
    CPU devices such as lavapipe have none.
  - Reports absent (an empty list and a RV(reason)), never a failure, when vulkaninfo,
    the Vulkan loader or any driver is missing. When only the full text fails, the devices
    are reported without subgroup and fp64 features, with a warning.
  - Changes nothing, so it runs the same in check mode, and reports C(changed=false).
  - Named C(gpulab.cluster.vulkan_info) until the collection followed Ansible's naming
    (C(_facts) modules return facts, C(_info) modules return data); that name still runs this
    module, redirected by the collection's C(meta/runtime.yml), with no deprecation.
version_added: "1.0.0"
author: gpulab contributors (@gpulab)
options:
  vulkaninfo:
    description: The vulkaninfo command; a name is looked up on PATH.
    type: str
    default: vulkaninfo
  dev_dir:
    description: Where the device nodes live.
    type: path
    default: /dev
  tegra_release:
    description: The file whose presence marks an L4T (Jetson) host.
    type: path
    default: /etc/nv_tegra_release
  nvidia_gpus_dir:
    description:
      - Where NVIDIA's driver describes each GPU, C(<pci>/information) with its device minor
        and GPU UUID.
    type: path
    default: /proc/driver/nvidia/gpus
attributes:
  check_mode:
    description: Runs in check mode; it changes nothing either way.
    support: full
  diff_mode:
    description: It changes nothing, so there is no diff to show.
    support: N/A
  facts:
    description: Returns C(ansible_facts) that update the host's facts.
    support: full
"""

EXAMPLES = r"""
- name: Gather the Vulkan devices
  gpulab.cluster.vulkan_facts:

- name: Show the GPUs that Slurm can hand out
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpulab_vulkan_devices | selectattr('gres_file') | list }}"

- name: Gather the devices from a recorded vulkaninfo (a script printing a real device's output)
  gpulab.cluster.vulkan_facts:
    vulkaninfo: /usr/local/lib/gpulab-standin/vulkaninfo
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
        uuid:
          description: deviceUUID, lowercase; for NVIDIA's GPUs the GPU UUID.
          type: str
          sample: 286a8de3-d1a4-7f52-bb3d-100d5c5aab3f
        device_files:
          description:
            - Every device node a job needs for this device, C(gres_file)
              first; empty for CPU devices and when the nodes are missing.
          type: list
          elements: str
          sample: [/dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools]
        gres_file:
          description: The device node that stands for this GPU in gres.conf (File=); null for CPUs.
          type: str
          sample: /dev/nvidia0
        gres_type:
          description: "The model in the device name, lowercase [a-z0-9_], for gres.conf's Type=."
          type: str
          sample: h200
        features:
          description:
            - Slurm node feature words, sorted - the model (C(gres_type)), C(vulkanMAJOR.MINOR)
              of the API version, C(subgroupN) (the subgroup size) and C(fp64) when the device
              has shaderFloat64.
          type: list
          elements: str
          sample: [fp64, h200, subgroup32, vulkan1.4]
    gpulab_vulkan_present:
      description: Whether vulkaninfo found at least one device.
      type: bool
    gpulab_tegra:
      description: Whether this is an L4T (Jetson) host, that is O(tegra_release) exists.
      type: bool
reason:
  description: Why no devices were found; empty when some were.
  returned: always
  type: str
  sample: vulkaninfo is not installed (package vulkan-tools)
"""

import glob
import os
from typing import Any, NamedTuple

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulab.cluster.plugins.module_utils.gpu_files import DEVICE_NODE_GLOBS
from ansible_collections.gpulab.cluster.plugins.module_utils.nvidia_driver import nvidia_gpus
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import (
    CommandResult,
    Runner,
    SlurmRunner,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.vulkan_devices import (
    add_features,
    assign_device_files,
    parse_details,
    parse_summary,
)

ARGUMENT_SPEC: dict[str, Any] = {
    "vulkaninfo": {"type": "str", "default": "vulkaninfo"},
    "dev_dir": {"type": "path", "default": "/dev"},
    "tegra_release": {"type": "path", "default": "/etc/nv_tegra_release"},
    "nvidia_gpus_dir": {"type": "path", "default": "/proc/driver/nvidia/gpus"},
}


def device_nodes(dev_dir: str) -> list[str]:
    """The GPU device nodes under dev_dir (not directories such as nvidia-caps), named as
    under /dev."""
    found = [
        path for pattern in DEVICE_NODE_GLOBS for path in glob.glob(os.path.join(dev_dir, pattern))
    ]
    return ["/dev/" + os.path.relpath(path, dev_dir) for path in found if not os.path.isdir(path)]


class HostNodes(NamedTuple):
    """What the host tells about its GPU nodes: the nodes (named as under /dev), whether it
    is an L4T host, and the NVIDIA driver's information of each GPU by its device minor (the N
    of /dev/nvidiaN; empty without NVIDIA's driver)."""

    nodes: list[str]
    tegra: bool
    nvidia: dict[int, dict[str, str]]


def _last_line(result: CommandResult) -> str:
    return ((result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""])[0]


def read_devices(
    command: str, runner: Runner, host: HostNodes
) -> tuple[list[dict[str, Any]], str, list[str]]:
    """The devices, why there are none, and warnings."""
    summary = runner.run([command, "--summary"])
    if summary.returncode != 0:
        return (
            [],
            f"vulkaninfo exited {summary.returncode} (no loader or driver?): {_last_line(summary)}",
            [],
        )
    devices = parse_summary(summary.stdout)
    if not devices:
        return [], "vulkaninfo lists no devices (no Vulkan driver installed?)", []
    full = runner.run([command])
    if full.returncode != 0:
        warning = f"vulkaninfo (full text) exited {full.returncode}: no subgroup or fp64 features"
        devices = _finish(devices, {}, host)
        return devices, "", [f"{warning}: {_last_line(full)}", *duplicate_warnings(devices)]
    devices = _finish(devices, parse_details(full.stdout), host)
    return devices, "", duplicate_warnings(devices)


def duplicate_warnings(devices: list[dict[str, Any]]) -> list[str]:
    """One warning per GPU that the loader lists more than once (two ICD manifests naming the
    same driver, e.g. the driver's own and a copy in /etc/vulkan/icd.d): jobs see it twice in
    `gpulab devices`; the slurm role writes its device file once."""
    indices: dict[str, list[int]] = {}
    for device in devices:
        if device.get("uuid"):
            indices.setdefault(device["uuid"], []).append(device["index"])
    return [
        f"Vulkan lists one GPU (UUID {uuid}) as devices {', '.join(map(str, found))}: two ICD "
        "manifests name its driver (look in /etc/vulkan/icd.d, /usr/share/vulkan/icd.d and "
        "$XDG_DATA_DIRS); remove the copy"
        for uuid, found in indices.items()
        if len(found) > 1
    ]


def _finish(
    devices: list[dict[str, Any]], details: dict[int, dict[str, str]], host: HostNodes
) -> list[dict[str, Any]]:
    add_features(devices, details)
    assign_device_files(devices, host.nodes, host.tegra, details, host.nvidia)
    return devices


def probe(params: dict[str, Any], runner: Runner, nodes: list[str], tegra: bool) -> dict[str, Any]:
    """The module's result: facts, the reason when there are no devices, and warnings."""
    command = runner.which(params["vulkaninfo"])
    devices: list[dict[str, Any]] = []
    warnings: list[str] = []
    if command is None:
        reason = f"{params['vulkaninfo']} is not installed (package vulkan-tools)"
    else:
        host = HostNodes(nodes, tegra, nvidia_gpus(params["nvidia_gpus_dir"]))
        devices, reason, warnings = read_devices(command, runner, host)
    return {
        "changed": False,
        "reason": reason,
        "warnings": warnings,
        "ansible_facts": {
            "gpulab_vulkan_devices": devices,
            "gpulab_vulkan_present": bool(devices),
            "gpulab_tegra": tegra,
        },
    }


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    tegra = os.path.exists(params["tegra_release"])
    result = probe(params, SlurmRunner(module), device_nodes(params["dev_dir"]), tegra)
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
