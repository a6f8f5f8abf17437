"""The command-line tool's exit codes (the contract's 0, 2, 3 and 4) and what each means;
`gpulab --help` prints this table."""

from __future__ import annotations

EXIT_OK = 0
EXIT_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_RUNTIME = 4
EXIT_INTERRUPTED = 130
"""The shell's status for a command stopped by Ctrl-C (128 + SIGINT)."""
EXIT_TERMINATED = 143
"""The shell's status for a command stopped by SIGTERM (128 + SIGTERM): scancel, preemption."""

EXIT_MEANINGS = {
    EXIT_OK: "success",
    EXIT_INPUT: "invalid input: bad JSON, schema or graph errors, bad flags; one line per error "
    "on stderr naming the node id or JSON path",
    EXIT_UNAVAILABLE: "the backend or device asked for is unavailable (or Slurm, or the host "
    "that runs its commands)",
    EXIT_RUNTIME: "a runtime failure, with its reason: out of device memory, device lost, a "
    "numerical check failed, a Slurm job failed",
    EXIT_INTERRUPTED: "stopped by Ctrl-C (submit --wait: the job goes on)",
    EXIT_TERMINATED: "stopped by SIGTERM (scancel, preemption); a result being written is "
    "removed, an earlier one kept",
}
