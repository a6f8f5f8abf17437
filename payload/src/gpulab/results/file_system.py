"""Which file system holds a folder, read from the kernel's mount table.

A file in /proc or /sys is "regular" to stat() but is a kernel setting (writing
/proc/sys/kernel/hostname as root renames the machine), so a result must never go there.
"""

from __future__ import annotations

import os

MOUNT_TABLE = "/proc/self/mountinfo"
KERNEL_FILE_SYSTEMS = frozenset(
    {
        "binfmt_misc",
        "bpf",
        "cgroup",
        "cgroup2",
        "configfs",
        "debugfs",
        "devpts",
        "efivarfs",
        "fusectl",
        "mqueue",
        "proc",
        "pstore",
        "rpc_pipefs",
        "securityfs",
        "selinuxfs",
        "sysfs",
        "tracefs",
    }
)
"""File systems whose files are the kernel's state and settings, not stored data."""


def file_system_type(folder: int) -> str | None:
    """The type (`ext4`, `nfs4`, `proc`, ...) of the file system holding the open folder
    `folder`, or None where the mount table does not say. Matched by device number, so the
    answer is about the folder held open, whatever its path names by now."""
    device = os.fstat(folder).st_dev
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        with open(MOUNT_TABLE, encoding="utf-8", errors="replace") as table:
            for line in table:
                # ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS [TAGS...] - TYPE SOURCE OPTIONS
                fields, _, rest = line.partition(" - ")
                parts = fields.split()
                if len(parts) > 2 and parts[2] == wanted and rest:
                    return rest.split()[0]
    except OSError:
        pass
    return None


def kernel_file_system(folder: int) -> str | None:
    """The type of the open folder's file system when it is one of KERNEL_FILE_SYSTEMS."""
    found = file_system_type(folder)
    return found if found in KERNEL_FILE_SYSTEMS else None
