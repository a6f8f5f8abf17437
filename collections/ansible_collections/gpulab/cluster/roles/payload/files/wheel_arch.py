"""Checks that a gpulab wheel holds its native libraries, built for the given architecture.

A wheel's platform tag is only a name: this reads each shared library's ELF header, so a
cross-build that silently used the control machine's compiler is caught before any worker
installs it. Usage: python3 wheel_arch.py WHEEL ARCH (ARCH as uname -m prints it).
"""

from __future__ import annotations

import struct
import sys
import zipfile

# ELF e_machine values (the ELF specification's EM_* constants).
ELF_MACHINES = {"x86_64": 62, "aarch64": 183, "armv7l": 40, "ppc64le": 21, "riscv64": 243}
REQUIRED = ("libgpulab_kernels.so", "libgpulab_suballoc.so")


def elf_machine(header: bytes) -> int | None:
    """The e_machine of a little-endian ELF header, None if the bytes are not ELF."""
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    return int(struct.unpack_from("<H", header, 18)[0])


def problems(wheel_path: str, arch: str) -> list[str]:
    expected = ELF_MACHINES.get(arch)
    if expected is None:
        return [f"unknown architecture {arch!r} (known: {', '.join(ELF_MACHINES)})"]
    found: dict[str, int | None] = {}
    with zipfile.ZipFile(wheel_path) as wheel:
        for name in wheel.namelist():
            base = name.rsplit("/", 1)[-1]
            if base.endswith(".so"):
                with wheel.open(name) as library:
                    found[base] = elf_machine(library.read(20))
    wrong = [f"{name} is missing" for name in REQUIRED if name not in found]
    wrong += [
        f"{name} is built for {_machine_name(machine)}"
        for name, machine in sorted(found.items())
        if machine != expected
    ]
    return wrong


def _machine_name(machine: int | None) -> str:
    if machine is None:
        return "no ELF machine (not an ELF file)"
    names = {number: arch for arch, number in ELF_MACHINES.items()}
    return names.get(machine, f"ELF machine {machine}")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: wheel_arch.py WHEEL ARCH", file=sys.stderr)
        return 2
    try:
        wrong = problems(argv[1], argv[2])
    except (OSError, zipfile.BadZipFile) as error:
        wrong = [f"cannot read it: {error}"]
    if wrong:
        print(f"{argv[1]} is not a {argv[2]} gpulab wheel: {'; '.join(wrong)}")
        return 1
    print(f"{argv[1]}: native libraries built for {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
