"""`--host ALIAS` as OpenSSH reads it: the system's `ssh -G` resolves the alias through
~/.ssh/config (Host and Match blocks, Include, HostName, User, Port, IdentityFile,
UserKnownHostsFile, IdentitiesOnly, ProxyJump, ProxyCommand) exactly as `ssh ALIAS` would,
so gpulab never parses the file itself. Flags given on the command line win, as with ssh.
Without an `ssh` program the alias is taken as the host name and the flags as they are.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from gpulab._shown import PATH_LIMIT, shown
from gpulab.submit.ssh import SshTarget, parse_target

# Seconds `ssh -G` may take (a `Match exec` block runs a command).
RESOLVE_TIMEOUT_S = 30.0


def ssh_g_argv(
    host: str,
    user: str | None = None,
    port: int | None = None,
    known_hosts: str | None = None,
    config: str | None = None,
) -> list[str]:
    """`ssh -G` for host, with the explicit flags as ssh itself takes them."""
    argv = ["ssh", "-G"]
    if config is not None:
        argv += ["-F", config]
    if user is not None:
        argv += ["-l", user]
    if port is not None:
        argv += ["-p", str(port)]
    if known_hosts is not None:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}"]
    return [*argv, "--", host]


def parse_ssh_g(text: str) -> dict[str, list[str]]:
    """`ssh -G`'s `key value` lines, keys lower-case, a repeated key's values in order."""
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            settings.setdefault(key.lower(), []).append(value.strip())
    return settings


def _jump_hop(hop: str) -> tuple[str | None, str, int | None]:
    """ProxyJump's `[user@]host[:port]` (or `ssh://[user@]host[:port]`) as (user, host, port)."""
    hop = hop.removeprefix("ssh://")
    user, _, address = hop.rpartition("@")
    port: int | None = None
    if address.startswith("["):  # [IPv6]:port
        host, _, rest = address[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    elif address.count(":") == 1 and address.partition(":")[2].isdigit():
        host, _, number = address.partition(":")
        port = int(number)
    else:
        host = address
    return (user or None), host, port


def jump_argv(jumps: str, host: str, port: int, config: str | None) -> list[str]:
    """The command OpenSSH itself runs for `ProxyJump jumps` (ssh.c): ssh to the last hop,
    through the earlier ones (-J), forwarding its stdin and stdout to host:port (-W)."""
    earlier, _, last = jumps.rpartition(",")
    user, jump_host, jump_port = _jump_hop(last)
    argv = ["ssh"]
    if user is not None:
        argv += ["-l", user]
    if jump_port is not None:
        argv += ["-p", str(jump_port)]
    if earlier:
        argv += ["-J", earlier]
    if config is not None:
        argv += ["-F", config]
    return [*argv, "-W", f"[{host}]:{port}", jump_host]


def proxy_command_argv(command: str, alias: str, host: str, port: int, user: str) -> list[str]:
    """ProxyCommand with its %h, %p, %r, %n and %% expanded, run by the shell as ssh does."""
    tokens = {"h": host, "p": str(port), "r": user, "n": alias, "%": "%"}
    expanded, index = [], 0
    while index < len(command):
        char = command[index]
        if char == "%" and index + 1 < len(command) and command[index + 1] in tokens:
            expanded.append(tokens[command[index + 1]])
            index += 2
        else:
            expanded.append(char)
            index += 1
    return ["/bin/sh", "-c", "exec " + "".join(expanded)]


def _existing(paths: Sequence[str]) -> tuple[str, ...]:
    return tuple(str(p) for p in (Path(path).expanduser() for path in paths) if p.is_file())


def target_from_settings(
    alias: str,
    settings: dict[str, list[str]],
    identity: str | None = None,
    known_hosts: str | None = None,
    config: str | None = None,
) -> SshTarget:
    """The SshTarget for `ssh -G`'s settings of alias (see parse_ssh_g); identity and
    known_hosts are the explicit flags, checked when connecting."""

    def one(key: str) -> str:
        return settings.get(key, [""])[0]

    host, user, port = one("hostname") or alias, one("user") or None, int(one("port") or 22)
    proxy: tuple[str, ...] = ()
    if one("proxyjump") not in ("", "none"):
        proxy = tuple(jump_argv(one("proxyjump"), host, port, config))
    elif one("proxycommand") not in ("", "none"):
        proxy = tuple(proxy_command_argv(one("proxycommand"), alias, host, port, user or ""))
    known = [f for line in settings.get("userknownhostsfile", []) for f in line.split()]
    known += [f for line in settings.get("globalknownhostsfile", []) for f in line.split()]
    return SshTarget(
        host,
        user,
        port,
        identity,
        known_hosts,
        alias=alias,
        key_files=_existing(settings.get("identityfile", [])),
        host_key_files=_existing(known),
        use_agent=one("identitiesonly") != "yes",
        proxy=proxy,
    )


def resolve_target(
    text: str,
    port: int | None = None,
    identity: str | None = None,
    known_hosts: str | None = None,
    config: str | None = None,
) -> SshTarget:
    """`--host [USER@]ALIAS` and the explicit SSH flags as OpenSSH resolves them (`ssh -G`);
    ValueError naming the problem when ssh refuses the alias or the config file."""
    user, alias = parse_target(text)
    if shutil.which("ssh") is None:
        if config is not None:
            raise ValueError(f"--ssh-config {config}: reading it needs OpenSSH's ssh program")
        return SshTarget(alias, user, port or 22, identity, known_hosts)
    argv = ssh_g_argv(alias, user, port, known_hosts, config)
    # The command names the config file: cut as a path.
    host, command = shown(text, quote=False), shown(shlex.join(argv), quote=False, limit=PATH_LIMIT)
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=RESOLVE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ValueError(f"--host {host}: {command} took over {RESOLVE_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        # Its first line names the file and line; the last only says it stopped.
        reason = done.stderr.strip().splitlines()[:1] or [f"exit status {done.returncode}"]
        raise ValueError(f"--host {host}: {command}: {reason[0]}")
    return target_from_settings(alias, parse_ssh_g(done.stdout), identity, known_hosts, config)
