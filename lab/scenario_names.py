"""Prints the podman networks or named volumes a molecule scenario's platforms use.

lab/molecule-test.sh removes them before a run: molecule's destroy only removes the
platforms molecule.yml names now, so leftovers of an older or killed run would stay.
Usage: python3 lab/scenario_names.py networks|volumes molecule/NAME/molecule.yml
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml


def names(kind: str, scenario_file: Path) -> list[str]:
    platforms = yaml.safe_load(scenario_file.read_text())["platforms"]
    found: set[str] = set()
    for platform in platforms:
        if kind == "networks":
            network = platform.get("network")
            if network:
                found.add(network)
        else:
            for spec in platform.get("volumes", []):
                source = spec.split(":", 1)[0]
                if not source.startswith(("/", "$", ".")):  # a named volume, not a host path
                    found.add(source)
    return sorted(found)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("networks", "volumes"):
        usage = "usage: scenario_names.py networks|volumes molecule/NAME/molecule.yml"
        print(usage, file=sys.stderr)
        return 2
    print(" ".join(names(argv[1], Path(argv[2]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
