"""SshTransport: Slurm's commands on the controller over SSH (paramiko), host keys checked.

paramiko is the optional extra `gpulab[submit]`, imported only when SSH is used. A target
resolved from ~/.ssh/config (gpulab.submit.ssh_config) may reach the host through a proxy
command (ProxyJump, ProxyCommand): the system's ssh or the configured command, its stdin and
stdout one end of a socket pair that paramiko speaks SSH over.
"""

from __future__ import annotations

import logging
import random
import shlex
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gpulab._closeable import Closeable
from gpulab._shown import PATH_LIMIT, shown
from gpulab.submit.transport import CommandResult, ConnectionLost, Unreachable

if TYPE_CHECKING:
    import paramiko

# The remote shell's status for a command it cannot find.
_NOT_FOUND = 127
# paramiko's exit status when none came: the connection dropped (or a signal ended it).
_NO_STATUS = -1
# What sshd sends before dropping a connection beyond MaxStartups (OpenSSH 8.x and later).
_MAX_STARTUPS = b"Exceeded MaxStartups"
# Bytes of the server's first answer kept to tell a server that speaks no SSH.
_FIRST_BYTES = 256


@dataclass(frozen=True)
class SshTarget:
    """Where and how to connect: user@host:port, a key (else the agent and ~/.ssh keys), and
    the known_hosts file that must hold the host's key (else ~/.ssh/known_hosts)."""

    host: str
    user: str | None = None
    port: int = 22
    identity: str | None = None
    known_hosts: str | None = None
    timeout_s: float = 15.0
    command_timeout_s: float = 300.0
    # A connection sshd drops during the handshake (MaxStartups: many clients at once) is
    # tried again this often in all, after 1, 2, 4, ... times retry_delay_s (with jitter).
    connect_attempts: int = 6
    retry_delay_s: float = 0.5
    # What ~/.ssh/config adds (see gpulab.submit.ssh_config): the name the user gave, the
    # keys to try beside the agent (IdentityFile), the known_hosts files to check when
    # known_hosts is not given (none: ~/.ssh/known_hosts), whether the agent may be used
    # (not with IdentitiesOnly yes), and the command that connects to the host (ProxyJump,
    # ProxyCommand; none: TCP to host:port).
    alias: str | None = None
    key_files: tuple[str, ...] = ()
    host_key_files: tuple[str, ...] = ()
    use_agent: bool = True
    proxy: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """user@host[:port], after the alias when ~/.ssh/config named another host."""
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        address = f"{user}{self.host}{port}"
        return address if self.alias in (None, self.host) else f"{self.alias} ({address})"

    @property
    def known_hosts_files(self) -> tuple[str, ...]:
        """The files that must hold the host's key, for messages."""
        if self.known_hosts is not None:
            return (self.known_hosts,)
        return self.host_key_files or (str(Path("~/.ssh/known_hosts").expanduser()),)


def parse_target(text: str) -> tuple[str | None, str]:
    """USER@HOST or HOST as (user, host); ValueError naming the problem."""
    user, _, host = text.rpartition("@")
    if not host or (text.count("@") and not user) or any(c.isspace() for c in text):
        raise ValueError(f"--host {shown(text)}: expected USER@HOST or HOST")
    return (user or None), host


def _paramiko() -> Any:
    try:
        import paramiko  # noqa: PLC0415 - optional extra, needed only for SSH
    except ImportError:
        raise Unreachable(
            "submitting over SSH needs paramiko, the extra gpulab[submit]: "
            "pip install 'paramiko>=3.4,<5'"
        ) from None
    # Its transport thread logs a traceback for every failed handshake; without a handler
    # that reaches stderr through logging's last resort. The failure is raised here anyway.
    logger = logging.getLogger("paramiko")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return paramiko


class _Dropped(Exception):
    """The server accepted the connection, then dropped it before SSH was set up."""


class _WatchedSocket(socket.socket):
    """A socket that keeps the first bytes the server sent: a server that speaks no SSH is
    told apart from sshd dropping a connection under load. Through a proxy command it holds
    the command, which ends when the socket closes, and the command's stderr."""

    first = b""
    proxy: subprocess.Popen[bytes] | None = None
    proxy_stderr: Any = None
    proxy_error: str | None = None

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        if len(self.first) < _FIRST_BYTES:
            self.first += data[: _FIRST_BYTES - len(self.first)]
        return data

    def proxy_failure(self) -> str | None:
        """The proxy command's last stderr line (or its exit status) when it ended by itself,
        else None; it is given a moment to end, then stopped (the connection through it has
        failed anyway)."""
        self._end_proxy(wait_s=2.0)
        return self.proxy_error

    def close(self) -> None:
        super().close()
        self._end_proxy(wait_s=0.0)

    def _end_proxy(self, wait_s: float) -> None:
        proxy, self.proxy = self.proxy, None
        if proxy is None:
            return
        try:
            status = proxy.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            proxy.terminate()
            proxy.wait()
            # Stopped here: whatever it wrote is not why the connection failed.
            self.proxy_stderr.close()
            return
        self.proxy_stderr.seek(0)
        text = self.proxy_stderr.read().decode("utf-8", "replace").strip()
        self.proxy_stderr.close()
        # Ended by itself, before or while SSH was set up: never worth another attempt.
        self.proxy_error = (text.splitlines() or [f"it ended, exit status {status}"])[-1]


def _watched(plain: socket.socket, target: SshTarget) -> _WatchedSocket:
    watched = _WatchedSocket(plain.family, plain.type, plain.proto, plain.detach())
    watched.settimeout(target.timeout_s)
    return watched


def _open_socket(target: SshTarget) -> _WatchedSocket:
    if target.proxy:
        return _open_proxy(target)
    plain = socket.create_connection((target.host, target.port), timeout=target.timeout_s)
    return _watched(plain, target)


def _open_proxy(target: SshTarget) -> _WatchedSocket:
    """A socket to the proxy command's stdin and stdout, as ssh's ProxyCommand."""
    ours, theirs = socket.socketpair()
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the socket
    try:
        process = subprocess.Popen(
            target.proxy,
            stdin=theirs.fileno(),
            stdout=theirs.fileno(),
            stderr=stderr,
        )
    except OSError as exc:
        ours.close()
        stderr.close()
        raise Unreachable(
            f"{target.where}: cannot start the proxy {shlex.join(target.proxy)}: "
            f"{exc.strerror or exc}"
        ) from None
    finally:
        theirs.close()
    watched = _watched(ours, target)
    watched.proxy, watched.proxy_stderr = process, stderr
    return watched


def _handshake_failed(target: SshTarget, sock: _WatchedSocket, reason: str) -> Exception:
    """Unreachable for a server that answered something other than SSH or a proxy command
    that failed; else _Dropped."""
    failed = sock.proxy_failure()
    if failed is not None:
        return Unreachable(f"{target.where}: the proxy {shlex.join(target.proxy)} failed: {failed}")
    first = sock.first.lstrip()
    if first and not first.startswith(b"SSH-") and _MAX_STARTUPS not in first:
        line = first.splitlines()[0].decode("ascii", "replace")
        return Unreachable(
            f"{target.where}: the server there speaks no SSH (it answered {line!r}); "
            f"is port {target.port} sshd's?"
        )
    return _Dropped(reason or "connection closed")


def _identity(lib: Any, path: str) -> paramiko.PKey:
    """The private key in path, whatever its type; ValueError naming the problem."""
    shown_path = shown(path, quote=False, limit=PATH_LIMIT)
    try:
        key: paramiko.PKey = lib.PKey.from_path(path)
    except lib.PasswordRequiredException:
        raise ValueError(
            f"--identity {shown_path}: the key is encrypted; load it into ssh-agent and leave out "
            "--identity"
        ) from None
    except OSError as exc:
        raise ValueError(f"--identity {shown_path}: {exc.strerror or exc}") from None
    except (lib.SSHException, ValueError) as exc:
        raise ValueError(f"--identity {shown_path}: not a private key ({exc})") from None
    return key


def _connect(target: SshTarget) -> paramiko.SSHClient:
    """An authenticated connection; a handshake that sshd drops is tried again with backoff."""
    lib = _paramiko()
    attempt = 1
    while True:
        try:
            return _connect_once(lib, target)
        except _Dropped as dropped:
            if attempt >= target.connect_attempts:
                raise Unreachable(
                    f"{target.where}: the SSH server dropped the connection during the "
                    f"handshake {attempt} times in a row ({dropped}); it may be refusing "
                    "new connections under load (sshd MaxStartups): try again later"
                ) from None
        delay = target.retry_delay_s * 2 ** (attempt - 1)
        # Jitter spreads out many clients that were dropped together.
        time.sleep(random.uniform(delay / 2, delay))
        attempt += 1


def _connect_once(lib: Any, target: SshTarget) -> paramiko.SSHClient:
    from gpulab.submit import ssh_trust  # noqa: PLC0415 - it needs paramiko, imported above

    client: paramiko.SSHClient = lib.SSHClient()
    try:
        factory = ssh_trust.trust(client, target)
    except OSError as exc:
        client.close()
        raise ValueError(f"--known-hosts {target.known_hosts}: {exc.strerror or exc}") from None
    known = " or ".join(target.known_hosts_files)
    try:
        pkey = _identity(lib, target.identity) if target.identity else None
        sock = _open_socket(target)
    except ValueError:
        client.close()
        raise
    except (ConnectionResetError, ConnectionAbortedError) as exc:  # accepted, then dropped
        client.close()
        raise _Dropped(exc.strerror or str(exc)) from None
    except OSError as exc:  # refused, unresolvable, timed out
        client.close()
        reason = exc.strerror or str(exc)
        raise Unreachable(f"{target.where}: cannot connect: {reason or 'timed out'}") from None
    try:
        # A given key is the only credential tried; without one, the agent and the keys of
        # ~/.ssh/config (IdentityFile), else those of ~/.ssh.
        client.connect(
            target.host,
            port=target.port,
            username=target.user,
            pkey=pkey,
            # paramiko takes a list of files here; its type stubs say one.
            key_filename=cast(Any, list(target.key_files) or None) if pkey is None else None,
            look_for_keys=target.identity is None and not target.key_files,
            allow_agent=target.identity is None and target.use_agent,
            timeout=target.timeout_s,
            banner_timeout=target.timeout_s,
            auth_timeout=target.timeout_s,
            sock=sock,
            transport_factory=factory,
        )
    except Unreachable:  # the host's certificate refused
        client.close()
        raise
    except lib.BadHostKeyException:
        client.close()
        raise Unreachable(
            f"{target.where}: its host key differs from the one in {known}; "
            "if the host was reinstalled, check its new key and replace the entry"
        ) from None
    except lib.AuthenticationException as exc:
        client.close()
        how = f"key {target.identity}" if target.identity else _credentials(target)
        raise Unreachable(f"{target.where}: authentication with {how} failed ({exc})") from None
    except lib.SSHException as exc:
        client.close()
        if "not found in known_hosts" in str(exc):
            raise Unreachable(
                f"{target.where}: host key not in {known}; check the key and add it "
                f"(ssh-keyscan -p {target.port} {target.host}, compared with the host's "
                "own /etc/ssh/ssh_host_*_key.pub) or pass --known-hosts FILE"
            ) from None
        raise _handshake_failed(target, sock, str(exc)) from None
    except (OSError, EOFError) as exc:  # reset or closed while setting up SSH
        client.close()
        raise _handshake_failed(target, sock, str(exc) or type(exc).__name__) from None
    return client


def _credentials(target: SshTarget) -> str:
    """The keys tried without --identity, for messages."""
    keys = ", ".join(target.key_files) if target.key_files else "~/.ssh keys"
    return f"the agent and {keys}" if target.use_agent else keys


class SshTransport(Closeable):
    """Runs argument lists through the remote shell, each word quoted with shlex, and moves
    files over SFTP. Close it (or use it as a context manager) to drop the connection."""

    def __init__(self, target: SshTarget) -> None:
        self._target = target
        self._client: paramiko.SSHClient | None = _connect(target)
        self._sftp: paramiko.SFTPClient | None = None

    @property
    def where(self) -> str:
        """user@host[:port]."""
        return self._target.where

    def _open(self) -> paramiko.SSHClient:
        if self._client is None:
            raise RuntimeError(f"the SSH connection to {self.where} is closed")
        link = self._client.get_transport()
        if link is None or not link.is_active():
            # Dropped under an earlier command: a new connection lets the next one (looking up
            # a job whose sbatch answer was lost, say) still reach the host.
            self._drop()
            self._client = _connect(self._target)
        return self._client

    def _files(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            self._sftp = self._open().open_sftp()
        return self._sftp

    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run argv on the host; ConnectionLost when the connection drops or times out while
        it runs (it may have run), Unreachable when argv[0] is missing. A connection dropped
        before is made anew first."""
        client = self._open()
        try:
            _, out, err = client.exec_command(
                shlex.join(argv), timeout=self._target.command_timeout_s
            )
            stdout = out.read().decode("utf-8", "replace")
            stderr = err.read().decode("utf-8", "replace")
            status = out.channel.recv_exit_status()
        except (OSError, EOFError, _paramiko().SSHException) as exc:
            reason = str(exc) or type(exc).__name__
            raise ConnectionLost(f"{self.where}: {argv[0]} failed over SSH: {reason}") from None
        link = client.get_transport()
        if status == _NO_STATUS and (link is None or not link.is_active()):
            # paramiko ends the command's output and gives -1 when the connection drops.
            raise ConnectionLost(
                f"{self.where}: {argv[0]} failed over SSH: the connection dropped while it ran"
            )
        if status == _NOT_FOUND and "not found" in stderr:
            raise Unreachable(f"{argv[0]}: not found on PATH on {self.where}")
        return CommandResult(tuple(argv), status, stdout, stderr)

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file over SFTP."""
        with self._files().open(path, "wb") as handle:
            handle.write(data)

    def read_file(self, path: str) -> bytes:
        """A whole file over SFTP (FileNotFoundError when missing)."""
        with self._files().open(path, "rb") as handle:
            data: bytes = handle.read()
        return data

    def close(self) -> None:
        """Close SFTP, then the connection; a second call does nothing."""
        self._drop()
        self._client = None

    def _drop(self) -> None:
        """Close SFTP and the connection, the SSHClient kept (see _open)."""
        sftp, self._sftp = self._sftp, None
        if sftp is not None:
            sftp.close()
        if self._client is not None:
            self._client.close()
