"""Reads lab/cluster.yml, the one definition of the lab cluster, for the scripts that run it.

A place (the lab, or a molecule scenario) is the cluster's nodes with the place's changes,
each as a container with its name, image, groups, devices, capabilities and address.
inventory/lab/hosts.py and molecule/shared/inventory.py are Ansible inventories made here.

Usage:
    python3 lab/cluster.py shell PLACE       bash assignments of lab/lib.sh's LAB_* names
    python3 lab/cluster.py place PLACE       the place as JSON (molecule/shared/create.yml)
    python3 lab/cluster.py network|volume PLACE   its podman network or shared volume

A spare node (`spare: true`) belongs to its place but joins the cluster only later: create.yml
does not make its container and the inventory leaves it out, unless the environment's
GPULAB_JOINED (comma-separated node names) names it (molecule/shared/grow.yml).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEFINITION = Path(__file__).resolve().with_name("cluster.yml")
NODE_KEYS = {"groups", "capabilities", "devices", "address", "arch", "image", "spare"}
PLACE_KEYS = {
    "container",
    "network",
    "subnet",
    "shared_volume",
    "shared_volume_mib",
    "internal",
    "image",
    "groups",
    "nodes",
}
# ${NAME:-default}: the environment's NAME when set and not empty, else default (as in bash).
_ENV_DEFAULT = re.compile(r"\$\{(\w+):-([^}]*)\}")


class ClusterError(Exception):
    """lab/cluster.yml does not define what was asked, or defines it wrongly."""


def expand(text: str) -> str:
    return _ENV_DEFAULT.sub(lambda m: os.environ.get(m[1]) or m[2], text)


@dataclass(frozen=True)
class Container:
    """One node of a place, as its container."""

    node: str  # the node's name in cluster.yml: the container's hostname, Slurm's NodeName
    name: str  # the container's name
    groups: tuple[str, ...]
    image: str
    capabilities: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    arch: str | None = None
    ip: str | None = None
    spare: bool = False  # joins the running cluster later (molecule/shared/grow.yml)


@dataclass(frozen=True)
class Place:
    """Where the cluster runs: its containers, network and shared storage."""

    name: str
    containers: tuple[Container, ...]  # the cluster's nodes from the start
    network: str
    subnet: str | None
    shared_volume: str
    shared_volume_mib: int | None
    shared_path: str
    apt_cache_host: str
    apt_cache_path: str
    spares: tuple[Container, ...] = ()  # nodes that join the running cluster later
    internal: bool = False  # a network with no way out: the nodes reach only each other

    @property
    def container_prefix(self) -> str:
        """What each container name adds before the node name (lab/lib.sh's LAB_PREFIX)."""
        node = self.containers[0]
        return node.name[: len(node.name) - len(node.node)]

    def group(self, name: str) -> list[Container]:
        return [c for c in self.containers if name in c.groups]

    @property
    def etc_hosts(self) -> dict[str, str]:
        """Every node's name and container name at its fixed address (a subnet's places only)."""
        hosts: dict[str, str] = {}
        for c in self.containers + self.spares:
            if c.ip:
                hosts |= {c.node: c.ip, c.name: c.ip}
        return hosts

    @property
    def volumes(self) -> list[str]:
        """Every node's two volumes: the apt cache and the shared storage."""
        return [
            f"{self.apt_cache_host}:{self.apt_cache_path}",
            f"{self.shared_volume}:{self.shared_path}",
        ]


def _unknown(what: str, given: dict[str, Any], known: set[str]) -> None:
    extra = sorted(set(given) - known)
    if extra:
        raise ClusterError(f"{DEFINITION.name}: {what} has unknown keys {', '.join(extra)}")


def _nodes(definition: dict[str, Any], place_name: str, place: dict[str, Any]) -> dict[str, Any]:
    """The place's nodes: the cluster's, with the place's changes applied."""
    nodes: dict[str, Any] = {name: dict(body) for name, body in definition["nodes"].items()}
    for name, change in (place.get("nodes") or {}).items():
        if change is None:
            if name not in nodes:
                raise ClusterError(f"{DEFINITION.name}: place {place_name} drops unknown {name}")
            del nodes[name]
        else:
            nodes[name] = {**nodes.get(name, {}), **change}
    for name, body in nodes.items():
        _unknown(f"node {name} (place {place_name})", body, NODE_KEYS)
        if not body.get("groups"):
            raise ClusterError(f"{DEFINITION.name}: node {name} (place {place_name}) has no groups")
    return nodes


def place(name: str, definition: dict[str, Any] | None = None) -> Place:
    definition = definition or yaml.safe_load(DEFINITION.read_text())
    places = definition["places"]
    if name not in places:
        known = ", ".join(places)
        raise ClusterError(f"{DEFINITION.name}: no place '{name}' (known: {known})")
    spec = places[name]
    _unknown(f"place {name}", spec, PLACE_KEYS)
    if "{node}" not in spec["container"]:
        raise ClusterError(f"{DEFINITION.name}: place {name}'s container must contain {{node}}")
    subnet = ipaddress.ip_network(spec["subnet"]) if spec.get("subnet") else None
    containers = []
    for node, body in _nodes(definition, name, spec).items():
        if subnet and "address" not in body:
            raise ClusterError(
                f"{DEFINITION.name}: node {node} has no address on place {name}'s subnet"
            )
        containers.append(
            Container(
                node=node,
                name=spec["container"].format(node=node),
                groups=tuple(body["groups"]) + tuple(spec.get("groups", [])),
                image=expand(body.get("image") or spec.get("image") or definition["image"]),
                capabilities=tuple(body.get("capabilities", [])),
                devices=tuple(body.get("devices", [])),
                arch=body.get("arch"),
                ip=str(subnet[body["address"]]) if subnet else None,
                spare=bool(body.get("spare", False)),
            )
        )
    ips = [c.ip for c in containers if c.ip]
    if len(set(ips)) != len(ips):
        raise ClusterError(f"{DEFINITION.name}: place {name} gives two nodes the same address")
    return Place(
        name=name,
        containers=tuple(c for c in containers if not c.spare),
        spares=tuple(c for c in containers if c.spare),
        network=spec["network"],
        subnet=str(subnet) if subnet else None,
        shared_volume=spec["shared_volume"],
        shared_volume_mib=spec.get("shared_volume_mib"),
        internal=bool(spec.get("internal", False)),
        shared_path=definition["shared_path"],
        apt_cache_host=expand(definition["apt_cache"]["host"]),
        apt_cache_path=definition["apt_cache"]["path"],
    )


def place_names(definition: dict[str, Any] | None = None) -> list[str]:
    definition = definition or yaml.safe_load(DEFINITION.read_text())
    return list(definition["places"])


def inventory(p: Place, *, by_node: bool, joined: frozenset[str] = frozenset()) -> dict[str, Any]:
    """An Ansible script inventory's --list: every node in its groups.

    by_node: hosts are named by node, reached at their container (the lab); otherwise hosts
    are named by container (molecule names them so, after its platforms). joined: the spare
    nodes that are in the cluster now. Every host also gets lab_checkout, this checkout's
    root, where the lab's payload role builds from (inventory/lab/group_vars/all/storage.yml).
    """
    lab_vars = {"lab_shared_path": p.shared_path, "lab_checkout": str(DEFINITION.parents[1])}
    groups: dict[str, Any] = {"all": {"vars": lab_vars}}
    hostvars: dict[str, Any] = {}
    for c in p.containers + tuple(s for s in p.spares if s.node in joined):
        host = c.node if by_node else c.name
        hostvars[host] = {"ansible_host": c.name} if by_node else {}
        for group in c.groups:
            groups.setdefault(group, {"hosts": []})["hosts"].append(host)
    return groups | {"_meta": {"hostvars": hostvars}}


def _container_json(p: Place, c: Container) -> dict[str, Any]:
    return {
        "name": c.name,
        "hostname": c.node,
        "image": c.image,
        "arch": c.arch,
        "capabilities": list(c.capabilities),
        "devices": [f"/dev/null:{path}" for path in c.devices],
        "ip": c.ip,
        "volumes": p.volumes,
    }


def place_json(p: Place) -> dict[str, Any]:
    """What molecule/shared/create.yml and destroy.yml need to make or remove the place."""
    return {
        "network": p.network,
        "subnet": p.subnet,
        "internal": p.internal,
        "shared_volume": p.shared_volume,
        "shared_volume_mib": p.shared_volume_mib,
        "etc_hosts": p.etc_hosts,
        "containers": [_container_json(p, c) for c in p.containers],
        "spares": [_container_json(p, c) for c in p.spares],
    }


def shell(p: Place) -> str:
    """lab/lib.sh's names, as bash assignments."""

    def array(words: list[str]) -> str:
        return "(" + " ".join(shlex.quote(w) for w in words) + ")"

    standins = p.group("jetson_standin")
    # A place with a subnet: each node at its address, every node's names in its /etc/hosts.
    hosts = [f"--add-host={name}:{ip}" for name, ip in p.etc_hosts.items()]
    options = {
        c.node: [f"--cap-add={cap}" for cap in c.capabilities]
        + [f"--device=/dev/null:{path}" for path in c.devices]
        + ([f"--ip={c.ip}", *hosts] if c.ip else [])
        for c in p.containers
    }
    lines = {
        "LAB_PREFIX": shlex.quote(p.container_prefix),
        "LAB_NETWORK": shlex.quote(p.network),
        "LAB_SUBNET": shlex.quote(p.subnet or ""),
        "LAB_NODES": array([c.node for c in p.containers]),
        "LAB_CONTROLLER_NODE": shlex.quote(p.group("controller")[0].node),
        "LAB_STORAGE_NODE": shlex.quote(p.group("storage")[0].node),
        "LAB_STANDIN_NODE": shlex.quote(standins[0].node if standins else ""),
        "LAB_STANDIN_DEVICES": array(list(standins[0].devices) if standins else []),
        "LAB_SHARED_VOLUME": shlex.quote(p.shared_volume),
        "LAB_SHARED_PATH": shlex.quote(p.shared_path),
        "LAB_IMAGE": shlex.quote(p.containers[0].image),
        "LAB_APT_CACHE": shlex.quote(p.apt_cache_host),
        "LAB_APT_CACHE_PATH": shlex.quote(p.apt_cache_path),
    }
    text = "".join(f"{name}={value}\n" for name, value in lines.items())
    # Each node's own `podman run` options: its capabilities, device nodes and address.
    pairs = " ".join(f"[{node}]={shlex.quote(' '.join(o))}" for node, o in options.items())
    return text + f"declare -gA LAB_RUN_OPTIONS=({pairs})\n"


def inventory_main(place_name: str, argv: list[str], *, by_node: bool) -> int:
    """An Ansible script inventory: --list prints every host, --host H its (no) own vars."""
    if len(argv) >= 2 and argv[1] == "--host":
        print("{}")
        return 0
    joined = frozenset(filter(None, os.environ.get("GPULAB_JOINED", "").split(",")))
    try:
        print(json.dumps(inventory(place(place_name), by_node=by_node, joined=joined)))
    except ClusterError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


USAGE = "usage: cluster.py shell|place|network|volume PLACE"


def main(argv: list[str]) -> int:
    args = argv[1:]
    try:
        match args:
            case ["shell", name]:
                print(shell(place(name)), end="")
            case ["place", name]:
                print(json.dumps(place_json(place(name))))
            case ["network", name]:
                print(place(name).network)
            case ["volume", name]:
                print(place(name).shared_volume)
            case _:
                print(USAGE, file=sys.stderr)
                return 2
    except ClusterError as error:
        print(f"cluster.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
