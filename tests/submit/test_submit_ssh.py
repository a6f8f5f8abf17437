"""SSH to servers on 127.0.0.1 that misbehave like real ones: a port that speaks HTTP, sshd
dropping connections under load (MaxStartups), then a real SSH server (paramiko's), reached
directly, by an alias of an SSH config file, through a ProxyCommand and through a jump host,
and showing a host key signed by an SSH certificate authority that known_hosts trusts."""

from __future__ import annotations

import contextlib
import shutil
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from gpulab.submit import ConnectionLost, SshTarget, SshTransport, Unreachable, resolve_target

paramiko = pytest.importorskip("paramiko", reason="paramiko (gpulab[submit]) is missing")

GRAPH = str(Path(__file__).resolve().parents[2] / "payload/examples/saxpy_norm.json")
HTTP_ANSWER = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

Behaviour = Callable[[socket.socket], None]


def reset(conn: socket.socket) -> None:
    """Close with a TCP reset, as a loaded sshd's dropped connection often looks."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def max_startups(conn: socket.socket) -> None:
    """What OpenSSH (8.x and later) sends before dropping a connection beyond MaxStartups."""
    conn.sendall(b"Exceeded MaxStartups\r\n")
    conn.close()


def http(conn: socket.socket) -> None:
    """A web server on the port."""
    conn.sendall(HTTP_ANSWER)
    conn.close()


@dataclass
class Server:
    """A TCP server on 127.0.0.1 answering its n-th connection with behaviours[n] (the last
    one repeats); it counts the connections."""

    behaviours: list[Behaviour]
    listener: socket.socket = field(default_factory=socket.socket)
    connections: int = 0

    @property
    def port(self) -> int:
        port: int = self.listener.getsockname()[1]
        return port

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed at the end of the test
                return
            behaviour = self.behaviours[min(self.connections, len(self.behaviours) - 1)]
            self.connections += 1
            behaviour(conn)


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    """Start a Server with the given behaviours; closed after the test."""
    servers: list[Server] = []

    def start(*behaviours: Behaviour) -> Server:
        server = Server(list(behaviours))
        server.listener.bind(("127.0.0.1", 0))
        server.listener.listen(16)
        threading.Thread(target=server.serve, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.listener.close()


@dataclass(frozen=True)
class Keys:
    """The server's host key, the client's key, and files for the client."""

    host: paramiko.RSAKey
    client: paramiko.RSAKey
    identity: Path
    folder: Path

    def known_hosts_path(self, port: int) -> Path:
        return self.folder / f"known_hosts-{port}"

    def known_hosts(self, port: int) -> Path:
        """A known_hosts file with the host's key for 127.0.0.1:port (written anew)."""
        path = self.known_hosts_path(port)
        path.write_text(f"[127.0.0.1]:{port} ssh-rsa {self.host.get_base64()}\n")
        return path


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    folder = tmp_path_factory.mktemp("ssh")
    client = paramiko.RSAKey.generate(2048)
    identity = folder / "id_rsa"
    client.write_private_key_file(str(identity))
    return Keys(paramiko.RSAKey.generate(2048), client, identity, folder)


class _EchoServer(paramiko.ServerInterface):
    """Accepts the client's key and answers each command with the command itself."""

    def __init__(self, client_key: paramiko.PKey) -> None:
        self.client_key = client_key

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL if key == self.client_key else paramiko.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        def answer() -> None:
            # EOF, not close: a close may overtake the reply to the exec request.
            channel.sendall(command + b"\n")
            channel.send_exit_status(0)
            channel.shutdown_write()

        threading.Thread(target=answer, daemon=True).start()
        return True


def ssh_server(keys: Keys) -> Behaviour:
    """A real SSH server (paramiko's) on the connection."""

    def behaviour(conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        transport.add_server_key(keys.host)
        transport.start_server(server=_EchoServer(keys.client))

    return behaviour


class _Dropping(_EchoServer):
    """Takes the command, then drops the connection without an answer: sshd killed, the
    network gone after the command was sent."""

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        # After the reply that accepts the command, as when the command then runs.
        threading.Timer(0.3, channel.get_transport().close).start()
        return True


def ssh_server_dropping(keys: Keys) -> Behaviour:
    """A real SSH server (paramiko's) that drops the connection once given a command."""

    def behaviour(conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        transport.add_server_key(keys.host)
        transport.start_server(server=_Dropping(keys.client))

    return behaviour


def _target(server: Server, keys: Keys, attempts: int = 6) -> SshTarget:
    return SshTarget(
        "127.0.0.1",
        "gpulab",
        server.port,
        str(keys.identity),
        str(keys.known_hosts(server.port)),
        timeout_s=10,
        connect_attempts=attempts,
        retry_delay_s=0.01,
    )


def test_a_port_that_speaks_http_exits_3_with_one_line(
    serve: Callable[..., Server], tmp_path: Path
) -> None:
    server = serve(http)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    # A process of its own: paramiko's logging reaches stderr there, unlike under pytest.
    argv = [sys.executable, "-m", "gpulab", "submit", GRAPH, "--host", "gpulab@127.0.0.1"]
    flags = ["--port", str(server.port), "--known-hosts", str(known_hosts)]
    done = subprocess.run([*argv, *flags], capture_output=True, text=True, check=False)
    assert done.returncode == 3
    assert done.stderr == (
        f"gpulab: gpulab@127.0.0.1:{server.port}: the server there speaks no SSH (it answered "
        f"'HTTP/1.1 400 Bad Request'); is port {server.port} sshd's?\n"
    )
    assert server.connections == 1


def test_dropped_handshakes_are_retried_until_an_answer(
    serve: Callable[..., Server], keys: Keys
) -> None:
    server = serve(reset, max_startups, reset, http)
    with pytest.raises(Unreachable, match="speaks no SSH"):
        SshTransport(_target(server, keys))
    assert server.connections == 4


def test_dropped_handshakes_then_sshd_connects(serve: Callable[..., Server], keys: Keys) -> None:
    server = serve(reset, max_startups, reset, ssh_server(keys))
    with SshTransport(_target(server, keys)) as transport:
        done = transport.run(["squeue", "--json"])
    assert (done.returncode, done.stdout) == (0, "squeue --json\n")
    assert server.connections == 4


def test_a_connection_dropped_under_a_command_is_lost_then_made_anew(
    serve: Callable[..., Server], keys: Keys
) -> None:
    server = serve(ssh_server_dropping(keys), ssh_server(keys))
    with SshTransport(_target(server, keys)) as transport:
        # It may have run there: ConnectionLost, never an empty answer with status -1.
        with pytest.raises(
            ConnectionLost, match=r"^gpulab@127\.0\.0\.1:\d+: sbatch failed over SSH"
        ):
            transport.run(["sbatch", "--parsable", "job.sh"])
        done = transport.run(["squeue", "--me"])
    assert (done.returncode, done.stdout) == (0, "squeue --me\n")
    assert server.connections == 2


def test_handshakes_dropped_every_time_give_up_with_one_line(
    serve: Callable[..., Server], keys: Keys
) -> None:
    server = serve(reset)
    with pytest.raises(Unreachable) as failure:
        SshTransport(_target(server, keys, attempts=3))
    message = str(failure.value)
    assert message.startswith(
        f"gpulab@127.0.0.1:{server.port}: the SSH server dropped the connection during the "
        "handshake 3 times in a row ("
    )
    assert message.endswith("(sshd MaxStartups): try again later")
    assert "\n" not in message
    assert server.connections == 3


# ~/.ssh/config (a file given as ssh -F): the alias resolved by OpenSSH's `ssh -G`, then
# reached directly, through a ProxyCommand, and through a ProxyJump that the system's ssh runs.

RELAY = """
import socket, sys, threading
marker, host, port = sys.argv[1:]
open(marker, "w").write(f"{host}:{port}")
conn = socket.create_connection((host, int(port)))
def upstream():
    while data := sys.stdin.buffer.read1(65536):
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)
threading.Thread(target=upstream, daemon=True).start()
while data := conn.recv(65536):
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
"""
"""A ProxyCommand: copies stdin and stdout to HOST:PORT and leaves a marker that it ran."""


def _ssh_config(keys: Keys, port: int, extra: str = "") -> str:
    path = keys.folder / f"config-{port}"
    path.write_text(
        f"Host lab\n    HostName 127.0.0.1\n    Port {port}\n    User gpulab\n{extra}"
        f"Host *\n    IdentityFile {keys.identity}\n"
        f"    UserKnownHostsFile {keys.known_hosts(port)}\n    BatchMode yes\n"
    )
    return str(path)


needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH's ssh is missing")


@needs_ssh
def test_an_alias_of_the_ssh_config_reaches_its_server(
    serve: Callable[..., Server], keys: Keys
) -> None:
    server = serve(ssh_server(keys))
    target = resolve_target("lab", config=_ssh_config(keys, server.port))
    with SshTransport(target) as transport:
        done = transport.run(["sinfo", "--json"])
    assert (done.returncode, done.stdout) == (0, "sinfo --json\n")
    assert transport.where == f"lab (gpulab@127.0.0.1:{server.port})"


@needs_ssh
def test_the_cli_names_the_alias_and_the_host_it_resolved_to(
    serve: Callable[..., Server], keys: Keys
) -> None:
    server = serve(http)
    argv = [sys.executable, "-m", "gpulab", "submit", GRAPH, "--host", "lab"]
    flags = ["--ssh-config", _ssh_config(keys, server.port)]
    done = subprocess.run([*argv, *flags], capture_output=True, text=True, check=False)
    assert done.returncode == 3
    assert done.stderr.startswith(
        f"gpulab: lab (gpulab@127.0.0.1:{server.port}): the server there speaks no SSH"
    )


@needs_ssh
def test_a_proxy_command_carries_the_connection(
    serve: Callable[..., Server], keys: Keys, tmp_path: Path
) -> None:
    server = serve(ssh_server(keys))
    relay, marker = tmp_path / "relay.py", tmp_path / "relayed"
    relay.write_text(RELAY)
    proxy = f"    ProxyCommand {sys.executable} {relay} {marker} %h %p\n"
    target = resolve_target("lab", config=_ssh_config(keys, server.port, proxy))
    with SshTransport(target) as transport:
        done = transport.run(["squeue"])
    assert done.stdout == "squeue\n"
    assert marker.read_text() == f"127.0.0.1:{server.port}"


@needs_ssh
def test_a_failing_proxy_command_is_one_line_with_its_reason(
    serve: Callable[..., Server], keys: Keys
) -> None:
    server = serve(ssh_server(keys))
    proxy = "    ProxyCommand sh -c 'echo bastion: no route to %h >&2; exit 1'\n"
    target = resolve_target("lab", config=_ssh_config(keys, server.port, proxy))
    with pytest.raises(Unreachable) as failure:
        SshTransport(target)
    assert str(failure.value).endswith("failed: bastion: no route to 127.0.0.1")
    assert server.connections == 0


class _Bastion(_EchoServer):
    """Also opens direct-tcpip channels (what `ssh -W` and ProxyJump ask a jump host for)."""

    def __init__(self, client_key: paramiko.PKey) -> None:
        super().__init__(client_key)
        self.destinations: dict[int, tuple[str, int]] = {}

    def check_channel_direct_tcpip_request(
        self, chanid: int, origin: tuple[str, int], destination: tuple[str, int]
    ) -> int:
        self.destinations[chanid] = destination
        return paramiko.OPEN_SUCCEEDED


def _pipe(source: Any, sink: Any) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        sink.close()


def bastion(keys: Keys, jumps: list[tuple[str, int]]) -> Behaviour:
    """A jump host: relays each direct-tcpip channel to its destination (listed in jumps)."""

    def behaviour(conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        transport.add_server_key(keys.host)
        server = _Bastion(keys.client)
        transport.start_server(server=server)
        while (channel := transport.accept(30)) is not None:
            destination = server.destinations[channel.get_id()]
            jumps.append(destination)
            onward = socket.create_connection(destination)
            threading.Thread(target=_pipe, args=(channel, onward), daemon=True).start()
            threading.Thread(target=_pipe, args=(onward, channel), daemon=True).start()

    return behaviour


@needs_ssh
def test_proxyjump_runs_through_the_jump_host_with_the_system_ssh(
    serve: Callable[..., Server], keys: Keys
) -> None:
    controller = serve(ssh_server(keys))
    jumps: list[tuple[str, int]] = []
    jump = serve(bastion(keys, jumps))
    path = _ssh_config(keys, controller.port, f"    ProxyJump gpulab@127.0.0.1:{jump.port}\n")
    # The jump host's key goes into the same known_hosts file as the controller's.
    with keys.known_hosts_path(controller.port).open("a") as known:
        known.write(f"[127.0.0.1]:{jump.port} ssh-rsa {keys.host.get_base64()}\n")
    target = resolve_target("lab", config=path)
    with SshTransport(target) as transport:
        done = transport.run(["sbatch", "--parsable"])
    assert done.stdout == "sbatch --parsable\n"
    assert jumps == [("127.0.0.1", controller.port)]


# Host certificates: known_hosts trusts a CA for the host (@cert-authority), the server shows
# its host key signed by that CA (ssh-keygen -s CA -h), as sshd does with HostCertificate.

needs_keygen = pytest.mark.skipif(
    shutil.which("ssh-keygen") is None, reason="OpenSSH's ssh-keygen is missing"
)


class _CertifiedHostKey(paramiko.Ed25519Key):
    """A host key that shows its certificate: paramiko's server sends a key's plain bytes
    whatever type was agreed, sshd sends the certificate for a certificate type."""

    def asbytes(self) -> bytes:
        assert self.public_blob is not None
        return bytes(self.public_blob.key_blob)


@dataclass(frozen=True)
class Authority:
    """A CA, another CA, and a host key, made by ssh-keygen; certificates signed on demand."""

    folder: Path
    client: paramiko.PKey

    @property
    def host_key(self) -> Path:
        return self.folder / "host_key"

    def public(self, name: str) -> str:
        """The `TYPE BASE64` of a public key file."""
        return " ".join((self.folder / f"{name}.pub").read_text().split()[:2])

    def sign(self, name: str, *flags: str, ca: str = "ca") -> Path:
        """The host key signed by ca (ssh-keygen -s ca -I name FLAGS): its -cert.pub file."""
        shutil.copy(self.folder / "host_key.pub", self.folder / f"{name}.pub")
        keygen = ["ssh-keygen", "-q", "-s", str(self.folder / ca), "-I", name, *flags]
        subprocess.run([*keygen, str(self.folder / f"{name}.pub")], check=True)
        return self.folder / f"{name}-cert.pub"

    def known_hosts(self, *lines: str) -> Path:
        path = self.folder / "known_hosts"
        path.write_text("".join(f"{line}\n" for line in lines))
        return path

    def trusting(self, ca: str = "ca", patterns: str = "[127.0.0.1]:*") -> str:
        return f"@cert-authority {patterns} {self.public(ca)} lab-ca"


@pytest.fixture(scope="module")
def authority(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Authority:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("OpenSSH's ssh-keygen is missing")
    folder = tmp_path_factory.mktemp("ca")
    for name in ("ca", "other_ca", "host_key"):
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name]
        subprocess.run([*keygen, "-f", str(folder / name)], check=True)
    return Authority(folder, keys.client)


def certified_server(authority: Authority, certificate: Path | None) -> Behaviour:
    """A real SSH server (paramiko's) with the host key, and its certificate if given: both
    offered, as sshd with HostKey and HostCertificate."""

    def behaviour(conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        transport.add_server_key(paramiko.Ed25519Key(filename=str(authority.host_key)))
        if certificate is not None:
            key = _CertifiedHostKey(filename=str(authority.host_key))
            key.load_certificate(str(certificate))
            assert key.public_blob is not None
            transport.server_key_dict[key.public_blob.key_type] = key
        # A client that refuses the host key drops the connection in the handshake.
        with contextlib.suppress(paramiko.SSHException, EOFError, OSError):
            transport.start_server(server=_EchoServer(authority.client))

    return behaviour


def _certified_target(server: Server, keys: Keys, known_hosts: Path) -> SshTarget:
    return SshTarget(
        "127.0.0.1",
        "gpulab",
        server.port,
        str(keys.identity),
        str(known_hosts),
        timeout_s=10,
        connect_attempts=1,
    )


def test_a_host_known_by_its_ca_connects_with_its_certificate(
    serve: Callable[..., Server], keys: Keys, authority: Authority
) -> None:
    certificate = authority.sign("controller", "-h", "-n", "127.0.0.1", "-V", "-5m:+1h")
    server = serve(certified_server(authority, certificate))
    known_hosts = authority.known_hosts(authority.trusting())
    with SshTransport(_certified_target(server, keys, known_hosts)) as transport:
        done = transport.run(["sinfo"])
    assert (done.returncode, done.stdout) == (0, "sinfo\n")


@pytest.mark.parametrize(
    ("name", "flags", "ca", "reason"),
    [
        (
            "expired",
            ("-h", "-n", "127.0.0.1", "-V", "20200101:20200102"),
            "ca",
            "'expired' expired at 2020-01-0",
        ),
        (
            "early",
            ("-h", "-n", "127.0.0.1", "-V", "+1d:+2d"),
            "ca",
            "'early' is not valid before ",
        ),
        (
            "elsewhere",
            ("-h", "-n", "node7,lab-login"),
            "ca",
            "'elsewhere' names node7, lab-login, not 127.0.0.1; sign the host key again "
            "(ssh-keygen -s CA -I ID -h -n 127.0.0.1 HOST_KEY.pub)",
        ),
        ("user", ("-n", "127.0.0.1"), "ca", "'user' is a user certificate, not a host"),
        (
            "optioned",
            ("-h", "-n", "127.0.0.1", "-O", "force-command=/bin/true"),
            "ca",
            "'optioned' has critical options a host certificate may not have: force-command",
        ),
        (
            "foreign",
            ("-h", "-n", "127.0.0.1"),
            "other_ca",
            "'foreign' is signed by a CA that known_hosts does not list for 127.0.0.1",
        ),
    ],
)
def test_a_certificate_that_does_not_vouch_for_the_host_is_refused_in_one_line(
    serve: Callable[..., Server],
    keys: Keys,
    authority: Authority,
    name: str,
    flags: tuple[str, ...],
    ca: str,
    reason: str,
) -> None:
    server = serve(certified_server(authority, authority.sign(name, *flags, ca=ca)))
    known_hosts = authority.known_hosts(authority.trusting())
    with pytest.raises(Unreachable) as failure:
        SshTransport(_certified_target(server, keys, known_hosts))
    message = str(failure.value)
    assert message.startswith(f"gpulab@127.0.0.1:{server.port}: host certificate refused: ")
    assert reason in message
    assert "\n" not in message


def test_a_revoked_ca_is_refused(
    serve: Callable[..., Server], keys: Keys, authority: Authority
) -> None:
    certificate = authority.sign("revoked", "-h", "-n", "127.0.0.1")
    server = serve(certified_server(authority, certificate))
    revoked = f"@revoked * {authority.public('ca')}"
    known_hosts = authority.known_hosts(authority.trusting(), revoked)
    with pytest.raises(Unreachable, match="'revoked' or its CA is marked @revoked"):
        SshTransport(_certified_target(server, keys, known_hosts))


def test_a_ca_for_other_hosts_leaves_the_host_unknown(
    serve: Callable[..., Server], keys: Keys, authority: Authority
) -> None:
    certificate = authority.sign("other", "-h", "-n", "127.0.0.1")
    server = serve(certified_server(authority, certificate))
    known_hosts = authority.known_hosts(authority.trusting(patterns="*.lab,!127.0.0.1"))
    with pytest.raises(Unreachable, match=r"host key not in .*known_hosts; check the key"):
        SshTransport(_certified_target(server, keys, known_hosts))


def test_a_plain_key_beside_marker_lines_connects_as_before(
    serve: Callable[..., Server], keys: Keys, authority: Authority
) -> None:
    """paramiko's own reader stops at a marker line (InvalidHostKey): gpulab reads past it."""
    server = serve(ssh_server(keys))
    known_hosts = authority.known_hosts(
        authority.trusting(patterns="*.lab"),
        f"@revoked * {authority.public('other_ca')}",
        f"[127.0.0.1]:{server.port} ssh-rsa {keys.host.get_base64()}",
    )
    with SshTransport(_certified_target(server, keys, known_hosts)) as transport:
        done = transport.run(["squeue"])
    assert done.stdout == "squeue\n"


def _submit(server: Server, keys: Keys, known_hosts: Path) -> subprocess.CompletedProcess[str]:
    """`gpulab submit --host` in a process of its own, as a user runs it."""
    argv = [sys.executable, "-m", "gpulab", "submit", GRAPH, "--host", "gpulab@127.0.0.1"]
    flags = ["--port", str(server.port), "--known-hosts", str(known_hosts)]
    flags += ["--identity", str(keys.identity)]
    return subprocess.run([*argv, *flags], capture_output=True, text=True, check=False)


def test_the_cli_refuses_an_expired_certificate_with_exit_3_and_one_line(
    serve: Callable[..., Server], keys: Keys, authority: Authority
) -> None:
    certificate = authority.sign("stale", "-h", "-n", "127.0.0.1", "-V", "20200101:20200102")
    server = serve(certified_server(authority, certificate))
    done = _submit(server, keys, authority.known_hosts(authority.trusting()))
    assert done.returncode == 3
    assert done.stderr.startswith(
        f"gpulab: gpulab@127.0.0.1:{server.port}: host certificate refused: 'stale' expired at "
    )
    assert done.stderr.count("\n") == 1


def test_the_cli_refuses_a_plain_key_where_only_its_ca_is_known(
    serve: Callable[..., Server], keys: Keys, authority: Authority
) -> None:
    """A server that shows no certificate (sshd without HostCertificate): one line, exit 3,
    naming the reason and both remedies."""
    server = serve(certified_server(authority, None))
    known_hosts = authority.known_hosts(authority.trusting())
    done = _submit(server, keys, known_hosts)
    assert done.returncode == 3
    assert done.stderr == (
        f"gpulab: gpulab@127.0.0.1:{server.port}: it showed a plain ssh-ed25519 host key, no "
        f"certificate, and {known_hosts}:1 trusts it only by a certificate of its CA "
        "(@cert-authority); give its sshd a HostCertificate, or check its key and add it to "
        f"known_hosts (ssh-keyscan -p {server.port} 127.0.0.1)\n"
    )
