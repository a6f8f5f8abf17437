"""What `gpulab --help` ends with: the exit codes (from gpulab.cli.errors) and the environment
variables gpulab reads (tests/payload/test_cli_help.py checks this list against the source)."""

from __future__ import annotations

import textwrap

from gpulab.cli.errors import EXIT_MEANINGS
from gpulab.cli.head_start import WORKER_ENV
from gpulab.cli.run import BUDGET_ENV
from gpulab.cli.submit import SHARED_DIR_ENV
from gpulab.submit.defaults import DEFAULT_SHARED_DIR

ENVIRONMENT = (
    (BUDGET_ENV, "run: cap every Vulkan heap (64M, 2GiB, ...) when --memory-budget is not given"),
    (WORKER_ENV, "run: the socket of the `gpulab worker` to run on when --worker is not given"),
    (SHARED_DIR_ENV, f"submit: the default of --shared-dir ({DEFAULT_SHARED_DIR})"),
    (
        "GPULAB_VK_VALIDATION",
        "1 turns on the Vulkan validation layer (with synchronization validation), where it is "
        "installed",
    ),
    ("GPULAB_VK_VALIDATION_LOG", "a file that every validation message is appended to"),
    ("GPULAB_MATMUL_TILE", "matmul's workgroup tile XxYxD (such as 16x16x8), for tuning"),
    (
        "GPULAB_MATMUL_VARIANT",
        "matmul's plan for every shape (such as 16x16x8+split4 or staged), for tuning",
    ),
    (
        "GPULAB_NATIVE_LIB_DIR",
        "the folder of the native backend's C libraries (default: the package's own)",
    ),
    (
        "GPULAB_CACHE_DIR",
        "where parsed C declarations, compiled shaders and each device's pipeline cache are "
        "kept (default: $XDG_CACHE_HOME/gpulab, else ~/.cache/gpulab)",
    ),
    ("XDG_CACHE_HOME", "see GPULAB_CACHE_DIR"),
    (
        "SLURM_STEP_GPUS, SLURM_JOB_GPUS",
        "in a Slurm job: the GPUs it was given, matched to Vulkan devices through gres.conf",
    ),
    (
        "SLURM_SHARDS_ON_NODE",
        "in a Slurm job: the shards of a GPU it was given (--gres=shard:N); without a GPU id "
        "the GPU's file comes from gres.conf's shard lines",
    ),
    ("SLURM_CONF", "in a Slurm job: gres.conf is read beside it (default /etc/slurm)"),
    ("SLURMD_NODENAME", "in a Slurm job: the node's name in gres.conf (default: the host name)"),
    (
        "SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_NODELIST",
        "in a Slurm job: recorded under `slurm` in the result",
    ),
)
"""(name or names, what gpulab does with them)."""

_WIDTH = 78
_INDENT = " " * 6


def _table(title: str, rows: list[tuple[str, str]]) -> str:
    """title, then each key with its text wrapped after it: on the key's line when the key
    is short (an exit code), else on the lines below (as argparse does for long options)."""
    lines = [f"{title}:"]
    for key, text in rows:
        if len(key) < len(_INDENT) - 2:
            first = f"  {key}".ljust(len(_INDENT))
        else:
            lines.append(f"  {key}")
            first = _INDENT
        lines += textwrap.wrap(text, _WIDTH, initial_indent=first, subsequent_indent=_INDENT)
    return "\n".join(lines)


def epilog() -> str:
    """The exit codes and the environment, as `gpulab --help` ends."""
    codes = [(str(code), meaning) for code, meaning in sorted(EXIT_MEANINGS.items())]
    return _table("exit codes", codes) + "\n\n" + _table("environment", list(ENVIRONMENT))
