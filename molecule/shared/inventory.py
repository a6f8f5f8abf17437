#!/usr/bin/env python3
"""The molecule scenario's groups, from lab/cluster.yml (an Ansible script inventory).

Molecule names each host after its platform, the container; this inventory, linked as the
scenario's `hosts` (.config/molecule/config.yml), puts those hosts in the groups of the
place named like the scenario, and gives every host lab_shared_path.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
from cluster import inventory_main

if __name__ == "__main__":
    scenario = os.environ.get("MOLECULE_SCENARIO_NAME")
    if not scenario:
        sys.exit("molecule/shared/inventory.py: set MOLECULE_SCENARIO_NAME (molecule sets it)")
    sys.exit(inventory_main(scenario, sys.argv, by_node=False))
