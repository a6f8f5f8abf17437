"""`gpulab submit GRAPH.json`: run a graph as a Slurm job and print its result JSON.

Here when `sbatch` is on PATH and no --host is given, else over SSH to the controller.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab._shown import PATH_LIMIT, shown
from gpulab.cli.arguments import add_backend, add_graph, seconds
from gpulab.cli.errors import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_UNAVAILABLE,
)
from gpulab.cli.graph_errors import guarded
from gpulab.cli.output import say, write_json
from gpulab.cli.run import memory_size
from gpulab.submit.defaults import DEFAULT_SHARED_DIR

if TYPE_CHECKING:
    from gpulab.submit import Transport

SHARED_DIR_ENV = "GPULAB_SHARED_DIR"
_SSH_ONLY = ("port", "identity", "known_hosts", "ssh_config")


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"expected a TCP port (1-65535), got {shown(text)}")
    return int(text)


def _gpus(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"expected a number of GPUs (0 or more), got {shown(text)}"
        )
    return int(text)


def _shards(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(
            f"expected a number of shards (1 or more), got {shown(text)}"
        )
    return int(text)


def add_parser(commands: Any) -> None:
    """Register `submit` on the subcommand parsers."""
    parser = commands.add_parser(
        "submit",
        help="run a graph as a Slurm job, here or on the controller over SSH",
        description="Validate GRAPH.json here, stage it on the shared storage, submit it with "
        "sbatch and, with --wait, print the job's result JSON. Slurm's commands run here when "
        "sbatch is on PATH, else on --host over SSH. The host may be an alias of ~/.ssh/config: "
        "OpenSSH's `ssh -G` resolves it (HostName, User, Port, IdentityFile, UserKnownHostsFile, "
        "ProxyJump, ProxyCommand) and the flags given here win, as with ssh. Host keys are "
        "checked against known_hosts; unknown hosts are refused.",
    )
    add_graph(parser)
    parser.add_argument(
        "--host",
        metavar="USER@HOST",
        help="the Slurm controller, over SSH: [USER@]HOST or [USER@]ALIAS of ~/.ssh/config",
    )
    parser.add_argument(
        "--port", type=_port, metavar="N", help="SSH port (default: the config's Port, else 22)"
    )
    parser.add_argument(
        "--identity",
        metavar="KEY",
        help="the only SSH private key to try (default: the agent, then the config's "
        "IdentityFile, else ~/.ssh's keys)",
    )
    parser.add_argument(
        "--known-hosts",
        metavar="FILE",
        help="known_hosts file holding the host's key (default: the config's "
        "UserKnownHostsFile, else ~/.ssh/known_hosts)",
    )
    parser.add_argument(
        "--ssh-config",
        metavar="FILE",
        help="read this SSH config file instead of ~/.ssh/config (as ssh -F)",
    )
    parser.add_argument("--partition", metavar="P", help="Slurm partition")
    parser.add_argument("--nodelist", metavar="N", help="Slurm nodes to run on")
    add_backend(parser)
    parser.add_argument(
        "--gpus",
        type=_gpus,
        metavar="N",
        help="GPUs to request from Slurm (sbatch --gres=gpu:N; 0 requests none). Default: 1 "
        "when --backend is vulkan or auto and the partition (or the default partition) has "
        "nodes with GPU GRES (sinfo %%G), else 0",
    )
    parser.add_argument(
        "--shards",
        type=_shards,
        metavar="N",
        help="ask Slurm for N shards of one GPU instead of GPUs (sbatch --gres=shard:N): the "
        "job shares that GPU with other jobs. Excludes --gpus",
    )
    parser.add_argument(
        "--shared-dir",
        metavar="DIR",
        default=os.environ.get(SHARED_DIR_ENV, DEFAULT_SHARED_DIR),
        help="job directories go here; the workers must see it at the same path "
        f"(default ${SHARED_DIR_ENV} or {DEFAULT_SHARED_DIR})",
    )
    parser.add_argument(
        "--gpulab",
        metavar="PATH",
        default="gpulab",
        help="the gpulab command on the workers (default: gpulab on the job's PATH)",
    )
    parser.add_argument(
        "--memory-budget",
        type=memory_size,
        metavar="BYTES",
        help="the job's `gpulab run --memory-budget` (64M, 2GiB, ...): cap every Vulkan heap "
        "on the worker",
    )
    parser.add_argument("--wait", action="store_true", help="wait and print the result JSON")
    parser.add_argument(
        "--timeout", type=seconds, metavar="S", help="with --wait: cancel the job after S s"
    )
    parser.add_argument("-o", "--output", metavar="OUT.json", help="with --wait: write here")
    parser.set_defaults(handler=main)


def _flag_problems(args: argparse.Namespace) -> list[str]:
    problems = []
    if args.gpus is not None and args.shards is not None:
        problems.append("--shards and --gpus exclude each other: ask for shards or for GPUs")
    problems += [
        f"--{name.replace('_', '-')} needs --host"
        for name in _SSH_ONLY
        if args.host is None and getattr(args, name) is not None
    ]
    problems += [
        f"--{name} needs --wait"
        for name in ("timeout", "output")
        if not args.wait and getattr(args, name) is not None
    ]
    if args.output is not None and not Path(args.output).resolve().parent.is_dir():
        output = shown(args.output, quote=False, limit=PATH_LIMIT)
        problems.append(f"--output {output}: its folder does not exist")
    if not args.shared_dir.startswith("/"):
        problems.append(f"--shared-dir {shown(args.shared_dir)}: must be an absolute path")
    return problems


def _transport(args: argparse.Namespace) -> Transport:
    from gpulab.submit import (  # noqa: PLC0415 - Slurm's client and SSH: for submit alone
        LocalTransport,
        SshTransport,
        Unreachable,
        resolve_target,
    )

    if args.host is None:
        if not LocalTransport.available():
            raise Unreachable("sbatch is not on PATH here: pass --host USER@CONTROLLER")
        return LocalTransport()
    target = resolve_target(args.host, args.port, args.identity, args.known_hosts, args.ssh_config)
    return SshTransport(target)


def _write(document: dict[str, Any], output: str | None) -> int:
    return EXIT_OK if write_json(document, output) else EXIT_INPUT


def _submit(args: argparse.Namespace) -> int:
    from gpulab.submit import JobOptions, prepare, submit, wait_for_result  # noqa: PLC0415

    staged = prepare(args.graph)
    options = JobOptions(
        args.backend,
        args.partition,
        args.nodelist,
        args.shared_dir,
        args.gpulab,
        args.memory_budget,
        args.gpus,
        args.shards,
    )
    transport = _transport(args)
    try:
        job = submit(transport, staged, options, say)
        given = f" with --gres={job.gres}" if job.gres else ""
        say(f"submitted job {job.job_id}{given} on {transport.where}; files in {job.job_dir}")
        if not args.wait:
            return _write(job.to_json(), None)
        try:
            document = wait_for_result(transport, job, say, timeout_s=args.timeout)
        except KeyboardInterrupt:
            say(f"stopped waiting; job {job.job_id} goes on (scancel {job.job_id} stops it)")
            return EXIT_INTERRUPTED
        return _write(document, args.output)
    finally:
        transport.close()


def _reported(args: argparse.Namespace) -> int:
    from gpulab.submit import JobFailed, SubmitRejected, Unreachable, WaitTimedOut  # noqa: PLC0415

    try:
        return _submit(args)
    except Unreachable as exc:
        say(str(exc))
        return EXIT_UNAVAILABLE
    except (JobFailed, WaitTimedOut) as exc:
        say(str(exc))
        return EXIT_RUNTIME
    except SubmitRejected as exc:
        say(str(exc))
        return EXIT_INPUT


def main(args: argparse.Namespace) -> int:
    """Submit (and with --wait, await) the graph; errors become one message and an exit code."""
    problems = _flag_problems(args)
    for problem in problems:
        say(problem)
    if problems:
        return EXIT_INPUT
    return guarded(args.graph, lambda: _reported(args))
