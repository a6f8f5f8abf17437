"""paramiko's side of host trust: known_hosts files with marker lines, and a host known only
by its certificate authority (the checks themselves: gpulab.submit.host_certificates).

Imported by gpulab.submit.ssh once paramiko, the optional extra, has loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey
from paramiko.pkey import UnknownKeyType

from gpulab.submit.host_certificates import (
    CERTIFICATE,
    Authority,
    KnownHosts,
    Untrusted,
    check_host_certificate,
    parse_certificate,
    read_known_hosts,
)
from gpulab.submit.transport import Unreachable

if TYPE_CHECKING:
    from gpulab.submit.ssh import SshTarget


class TransportFactory(Protocol):
    """What SSHClient.connect takes as transport_factory."""

    def __call__(
        self,
        sock: Any,
        /,
        *,
        gss_kex: bool,
        gss_deleg_creds: bool,
        disabled_algorithms: Mapping[str, Iterable[str]] | None,
    ) -> paramiko.Transport: ...


def load_known_hosts(client: paramiko.SSHClient, paths: Sequence[str], strict: bool) -> KnownHosts:
    """Read paths: their plain keys into client (a @revoked key left out), the marker lines
    returned. paramiko's own reader stops at the first @cert-authority or @revoked line
    (InvalidHostKey), so it is given the plain lines one by one; a line it cannot read is
    skipped, as ssh skips it. With strict, a file that cannot be read raises OSError."""
    known = read_known_hosts(paths, strict=strict)
    keys = client.get_host_keys()
    for number, line in known.plain:
        try:
            entry = HostKeyEntry.from_line(line, number)
        except (paramiko.SSHException, InvalidHostKey):
            continue
        if entry is not None and entry.key.asbytes() not in known.revoked:
            for name in entry.hostnames:
                keys.add(name, entry.key.get_name(), entry.key)
    return known


def trust(client: paramiko.SSHClient, target: SshTarget) -> TransportFactory | None:
    """Load the target's known_hosts into client and set how an unlisted key is met: refused
    (an unknown host is never trusted on first use), or, for a host known only by its CA
    (no plain key, @cert-authority lines that match it), checked as its certificate. The
    transport factory to connect with is returned (None: paramiko's own). An unreadable
    --known-hosts raises OSError; the SSH config's files are skipped then, as ssh does."""
    known = load_known_hosts(
        client, target.known_hosts_files, strict=target.known_hosts is not None
    )
    # The name known_hosts gives the host, as paramiko looks it up.
    name = target.host if target.port == 22 else f"[{target.host}]:{target.port}"
    authorities = [] if client.get_host_keys().lookup(name) else known.authorities_for(name)
    if not authorities:
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        return None
    policy = CertificatePolicy(target.where, target.host, authorities, known.revoked)
    client.set_missing_host_key_policy(policy)
    return certificates_first


class CertificatesFirst(paramiko.Transport):
    """Asks for the host's certificate before its plain key, as ssh does for a host known
    only by its CA: paramiko lists the certificate types last, so a server that has both
    would show its plain key."""

    @property
    def preferred_keys(self) -> Sequence[str]:
        keys = tuple(super().preferred_keys)
        certificates = tuple(key for key in keys if key.endswith(CERTIFICATE))
        return certificates + tuple(key for key in keys if key not in certificates)


def certificates_first(sock: Any, /, **options: Any) -> paramiko.Transport:
    """SSHClient.connect's transport_factory for CertificatesFirst. The options are what the
    installed paramiko passes its factory (4.x: gss_kex, gss_deleg_creds and
    disabled_algorithms; 5.x dropped GSS-API and passes disabled_algorithms alone)."""
    return CertificatesFirst(sock, **options)


class CertificatePolicy(paramiko.MissingHostKeyPolicy):
    """For a host without a plain key in known_hosts but with @cert-authority lines that
    match it: the key the server showed must be a host certificate one of those CAs signed
    for it (check_host_certificate); anything else is Unreachable, in one line."""

    def __init__(
        self, where: str, host: str, authorities: list[Authority], revoked: frozenset[bytes]
    ) -> None:
        self._where, self._host = where, host
        self._authorities, self._revoked = authorities, revoked

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        blob = key.public_blob
        if blob is None or not blob.key_type.endswith(CERTIFICATE):
            raise Unreachable(
                f"{self._where}: it showed a plain {key.get_name()} host key, no certificate, "
                f"and {self._authorities[0].where} trusts it only by a certificate of its CA "
                "(@cert-authority); give its sshd a HostCertificate, or check its key and add "
                f"it to known_hosts (ssh-keyscan {_keyscan(hostname)})"
            )
        try:
            check_host_certificate(
                parse_certificate(blob.key_blob),
                self._host,
                self._authorities,
                revoked=self._revoked,
                verify=verify_signature,
            )
        except (ValueError, Untrusted) as exc:
            raise Unreachable(f"{self._where}: host certificate refused: {exc}") from None


def _keyscan(name: str) -> str:
    """ssh-keyscan's arguments for a known_hosts name (host, or [host]:port)."""
    if name.startswith("[") and "]:" in name:
        host, _, port = name[1:].partition("]:")
        return f"-p {port} {host}"
    return name


def verify_signature(ca_key: bytes, signed: bytes, signature: bytes) -> bool:
    """Whether signature is ca_key's over signed (paramiko's key classes)."""
    try:
        key_type = paramiko.Message(ca_key).get_text()
        ca = paramiko.PKey.from_type_string(key_type, ca_key)
        return bool(ca.verify_ssh_sig(signed, paramiko.Message(signature)))
    except (paramiko.SSHException, UnknownKeyType, ValueError):
        return False
