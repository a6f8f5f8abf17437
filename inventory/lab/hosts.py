#!/usr/bin/env python3
"""The lab's hosts, from lab/cluster.yml's place `lab` (an Ansible script inventory).

Each host is a systemd container named gpulab-lab-HOST (its ansible_host, made by lab/up.sh)
whose hostname is HOST, also its Slurm NodeName; groups controller, storage, workers and
jetson_standin. worker2 is a stand-in for a Jetson Orin (L4T r36), not a Jetson: a Debian 12
x86_64 container with L4T's release file, Tegra-named device nodes bound from /dev/null,
JetPack's ICD file and a recorded Orin vulkaninfo (lab/standin.yml; its settings:
group_vars/jetson_standin.yml). Slurm gets its Orin GRES; its jobs compute on lavapipe.
Every host also has lab_shared_path, the shared storage's path (group_vars/all/storage.yml).
See them with `ansible-inventory -i inventory/lab --graph`.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
from cluster import inventory_main

if __name__ == "__main__":
    sys.exit(inventory_main("lab", sys.argv, by_node=True))
