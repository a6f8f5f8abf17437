#!/usr/bin/env python3
"""Where a command's CPU time goes: every process it and the lab's containers ran, by command.

Runs COMMAND with the kernel's process accounting on (accton, from Debian's acct package), then
prints the CPU seconds of the processes that ended meanwhile, grouped by where they ran (the
control machine, or a container: a descendant of podman's conmon) and by command name, beside
the busy CPU seconds of /proc/stat. Accounting sees every process of the machine, containers
included, however short-lived, which a sampling profiler of one process does not; what it
misses is kernel threads and processes still running at the end. The kernel counts in ticks of
10 ms, so a process of a few milliseconds may count as nothing. Accounting writes to one file for
the whole machine: run one profile at a time.

Usage: scripts/cpu-profile.py [--top N] -- COMMAND [ARG...]   (as root)
e.g.   scripts/cpu-profile.py -- make test-molecule
docs/timing.md shows what it printed for `make test` and molecule's scenarios.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

K = TypeVar("K")

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime,
# etime (float), then utime, stime and six more comp_t, then comm[16]. 64 bytes.
ACCT_V3 = struct.Struct("<BBHIIIIIIf8H16s")
TICKS_PER_SECOND = 100  # AHZ
# What conmon starts on the control machine itself: the container's cleanup, the runtime.
HOST_TOOLS = frozenset({"conmon", "podman", "runc", "crun"})


@dataclass(frozen=True)
class Process:
    command: str
    cpu: float  # user + system, seconds
    pid: int
    ppid: int
    start: float = 0.0  # seconds since the epoch, whole seconds
    end: float = 0.0


def comp_t(value: int) -> int:
    """A comp_t: 13 bits of mantissa, 3 bits of base-8 exponent."""
    return (value & 0x1FFF) << (((value >> 13) & 0x7) * 3)


def read_accounting(path: Path) -> list[Process]:
    data = path.read_bytes()
    processes = []
    for offset in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        fields = ACCT_V3.unpack_from(data, offset)
        if fields[1] & 0x7F != 3:
            sys.exit(f"cpu-profile: {path}: record {offset // ACCT_V3.size} is not version 3")
        pid, ppid, start, elapsed = fields[6], fields[7], fields[8], fields[9]
        cpu = (comp_t(fields[10]) + comp_t(fields[11])) / TICKS_PER_SECOND
        command = fields[18].split(b"\0", 1)[0].decode(errors="replace")
        processes.append(
            Process(command, cpu, pid, ppid, start, start + elapsed / TICKS_PER_SECOND)
        )
    return processes


def where(processes: list[Process]) -> list[str]:
    """Each process's place: 'container' below a conmon process, else 'control machine'.

    A long run reuses pids (32768 of them on a small machine), so a process's parent is the
    process of its parent pid that was running when it started."""
    by_pid: dict[int, list[int]] = collections.defaultdict(list)
    for index, process in enumerate(processes):
        by_pid[process.pid].append(index)

    def parent_of(index: int) -> int | None:
        child = processes[index]
        alive = [  # start is in whole seconds: a second's slack
            other
            for other in by_pid.get(child.ppid, [])
            if other != index
            and processes[other].start - 1 <= child.start <= processes[other].end + 1
        ]
        return max(alive, key=lambda other: processes[other].start, default=None)

    place: dict[int, str] = {}

    def place_of(index: int, seen: frozenset[int]) -> str:
        if index not in place:
            parent = parent_of(index)
            if parent is None or parent in seen:
                place[index] = "control machine"
            elif processes[parent].command == "conmon":
                host_tool = processes[index].command in HOST_TOOLS
                place[index] = "control machine" if host_tool else "container"
            else:
                place[index] = place_of(parent, seen | {index})
        return place[index]

    return [place_of(index, frozenset()) for index in range(len(processes))]


def busy_seconds() -> float:
    with open("/proc/stat") as stat:
        fields = stat.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _largest(values: dict[K, float]) -> list[tuple[K, float]]:
    return sorted(values.items(), key=lambda item: item[1], reverse=True)


def report(processes: list[Process], busy: float, top: int) -> None:
    places = where(processes)
    seconds: dict[tuple[str, str], float] = collections.defaultdict(float)
    count: collections.Counter[tuple[str, str]] = collections.Counter()
    totals: dict[str, float] = collections.defaultdict(float)
    for process, place in zip(processes, places, strict=True):
        key = (place, process.command)
        seconds[key] += process.cpu
        count[key] += 1
        totals[place] += process.cpu
    counted = sum(totals.values())
    print(
        f"==> cpu-profile: {busy:.1f} CPU-s busy (/proc/stat); {counted:.1f} in the "
        f"{len(processes)} processes that ended: "
        + ", ".join(f"{name} {value:.1f}" for name, value in _largest(totals))
    )
    print(f"    {'where':16} {'command':16} {'CPU-s':>8} {'processes':>10} {'ms each':>8}")
    for (place_name, command), value in _largest(seconds)[:top]:
        n = count[(place_name, command)]
        print(f"    {place_name:16} {command:16} {value:8.1f} {n:10d} {1000 * value / n:8.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=30, help="rows to print (default 30)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command: scripts/cpu-profile.py -- COMMAND [ARG...]")
    if os.geteuid() != 0:
        sys.exit("cpu-profile: process accounting needs root")
    if shutil.which("accton") is None:
        print("==> cpu-profile: apt: installing acct (accton)", file=sys.stderr)
        apt = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=apt)
        subprocess.run(["apt-get", "install", "-y", "-qq", "acct"], check=True, env=apt)
    with tempfile.TemporaryDirectory(prefix="cpu-profile.") as folder:
        accounting = Path(folder, "pacct")
        accounting.touch()
        subprocess.run(["accton", str(accounting)], check=True, stdout=subprocess.DEVNULL)
        busy = busy_seconds()
        try:
            rc = subprocess.run(command, check=False).returncode
        finally:
            busy = busy_seconds() - busy
            subprocess.run(["accton", "off"], check=True, stdout=subprocess.DEVNULL)
        report(read_accounting(accounting), busy, args.top)
    return rc


if __name__ == "__main__":
    sys.exit(main())
