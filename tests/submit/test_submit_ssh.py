"""SSH to servers on 127.0.0.1 that misbehave like real ones: a port that speaks HTTP, sshd
dropping connections under load (MaxStartups), then a real SSH server (paramiko's)."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from gpulab.submit import SshTarget, SshTransport, Unreachable

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

    def known_hosts(self, port: int) -> Path:
        path = self.folder / f"known_hosts-{port}"
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
