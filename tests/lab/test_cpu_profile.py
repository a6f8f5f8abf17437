"""scripts/cpu-profile.py: reading the kernel's accounting records and placing each process.

Accounting itself is machine-wide (one file at a time), so these tests never switch it on: a
profile of `make test` running them would lose its records.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts/cpu-profile.py"


@pytest.fixture(scope="module")
def profile() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cpu_profile", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through it
    spec.loader.exec_module(module)
    return module


def _record(profile: ModuleType, command: str, pid: int, ppid: int, ticks: int) -> bytes:
    """One acct_v3 record as the kernel writes it: ticks of user time, none of system time."""
    return bytes(
        profile.ACCT_V3.pack(
            0, 3, 0, 0, 0, 0, pid, ppid, 0, 0.0, ticks, 0, 0, 0, 0, 0, 0, 0, command.encode()
        )
    )


def test_comp_t_is_a_mantissa_and_a_base_8_exponent(profile: ModuleType) -> None:
    assert profile.comp_t(0x1FFF) == 8191
    assert profile.comp_t((1 << 13) | 1) == 8
    assert profile.comp_t((2 << 13) | 3) == 192


def test_records_are_read_with_their_cpu_seconds(profile: ModuleType, tmp_path: Path) -> None:
    accounting = tmp_path / "pacct"
    accounting.write_bytes(
        _record(profile, "python3", 40, 30, 250) + _record(profile, "ssh", 41, 1, 1)
    )
    assert profile.read_accounting(accounting) == [
        profile.Process("python3", 2.5, 40, 30),
        profile.Process("ssh", 0.01, 41, 1),
    ]


def test_a_process_below_conmon_ran_in_a_container(profile: ModuleType) -> None:
    process = profile.Process
    processes = [
        process("conmon", 0.0, 10, 1),
        process("systemd", 0.9, 20, 10),  # the container's init
        process("sshd", 0.1, 30, 20),
        process("python3", 0.2, 40, 30),  # a module run in the container
        process("podman", 0.1, 50, 10),  # conmon's cleanup, on the control machine
        process("ansible-playboo", 1.0, 60, 5),
        process("a", 0.0, 70, 71),  # pids in a loop
        process("b", 0.0, 71, 70),
    ]
    assert profile.where(processes) == [
        "control machine",
        "container",
        "container",
        "container",
        "control machine",
        "control machine",
        "control machine",
        "control machine",
    ]


def test_a_reused_pid_is_the_parent_only_while_it_ran(profile: ModuleType) -> None:
    """Pids wrap in a long run: the parent is the process of that pid alive at the start."""
    process = profile.Process
    processes = [
        process("sshd", 0.1, 30, 20, start=100, end=110),
        process("conmon", 0.0, 20, 1, start=90, end=120),
        process("python3", 0.2, 40, 30, start=105, end=106),  # below the container's sshd
        process("bash", 0.0, 30, 1, start=200, end=300),  # pid 30 again, on the control machine
        process("python3", 0.2, 41, 30, start=250, end=251),
    ]
    assert profile.where(processes) == [
        "container",
        "control machine",
        "container",
        "control machine",
        "control machine",
    ]


def test_the_report_sums_by_place_and_command(
    profile: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    process = profile.Process
    processes = [
        process("conmon", 0.0, 10, 1),
        process("python3", 0.25, 20, 10),
        process("python3", 0.5, 21, 10),
    ]
    profile.report(processes, busy=1.0, top=5)
    out = capsys.readouterr().out
    assert "1.0 CPU-s busy (/proc/stat); 0.8 in the 3 processes that ended: container 0.8" in out
    assert "container        python3               0.8          2    375.0" in out
