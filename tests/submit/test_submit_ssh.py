"""SSH to servers on 127.0.0.1 that misbehave like real ones: a port that speaks HTTP, sshd
dropping connections under load (MaxStartups), then a real SSH server (paramiko's), reached
directly, by an alias of an SSH config file, through a ProxyCommand and through a jump host."""

from __future__ import annotations

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
