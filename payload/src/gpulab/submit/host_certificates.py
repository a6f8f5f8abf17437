"""Host keys signed by an SSH certificate authority, checked as OpenSSH checks them.

known_hosts(5) trusts a CA for a set of hosts with a `@cert-authority PATTERNS KEY` line and
refuses keys listed on `@revoked` lines. paramiko reads neither (version 4.0 stops at the
first marker line with InvalidHostKey), and it keeps a host certificate the server presents
(the `*-cert-v01@openssh.com` host key types) as raw bytes without checking them. This module
reads the marker lines, parses a certificate (PROTOCOL.certkeys) and decides whether to trust
it: a host certificate, signed by a CA listed for the host, valid now, naming the host among
its principals, with no critical option, nothing in it revoked. The CA's signature itself is
checked by the caller's `verify` (paramiko's key classes), so this module needs no paramiko.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CERTIFICATE = "-cert-v01@openssh.com"
"""How the names of certificate key types end (ssh-ed25519-cert-v01@openssh.com)."""
HOST_CERTIFICATE = 2
"""A certificate's type field for a host certificate (1 is a user certificate)."""
FOREVER = 2**64 - 1
"""valid_before of a certificate that never expires."""
_KEY_FIELDS = {
    "ssh-ed25519": 1,  # the key
    "ssh-rsa": 2,  # e, n
    "ecdsa-sha2-nistp256": 2,  # curve, point
    "ecdsa-sha2-nistp384": 2,
    "ecdsa-sha2-nistp521": 2,
    "ssh-dss": 4,  # p, q, g, y
}
"""The public key's fields in a certificate of each key type, each an SSH string or mpint."""
_SHA1_RSA = "ssh-rsa"
"""The CA signature algorithm OpenSSH 8.2 and later refuse (RSA with SHA-1)."""

Verify = Callable[[bytes, bytes, bytes], bool]
"""(CA public key blob, signed bytes, signature blob) -> whether the signature is the CA's."""


class Untrusted(Exception):
    """The host certificate is not to be trusted; the message says why and what to do."""


@dataclass(frozen=True)
class Authority:
    """A `@cert-authority` line: the hosts it vouches for and the CA's public key."""

    patterns: str
    key: bytes
    where: str
    """path:line, for messages."""

    def vouches_for(self, name: str) -> bool:
        """Whether the line's host patterns match name (host, or [host]:port off port 22)."""
        return host_matches(self.patterns, name)


@dataclass(frozen=True)
class KnownHosts:
    """known_hosts files split for their readers: the ordinary lines (for paramiko), the CAs,
    and the revoked keys' blobs."""

    plain: tuple[tuple[int, str], ...]
    """(line number, line) of each line without a marker."""
    authorities: tuple[Authority, ...]
    revoked: frozenset[bytes]

    def authorities_for(self, name: str) -> list[Authority]:
        """The CAs whose patterns match name."""
        return [authority for authority in self.authorities if authority.vouches_for(name)]


def read_known_hosts(paths: Iterable[str], strict: bool = False) -> KnownHosts:
    """The lines of paths; a file that cannot be read is skipped as ssh skips it, unless
    strict (then its OSError is raised). Marker lines that do not parse are skipped too."""
    plain: list[tuple[int, str]] = []
    authorities: list[Authority] = []
    revoked: set[bytes] = set()
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            if strict:
                raise
            continue
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if not line.startswith("@"):
                plain.append((number, line))
                continue
            fields = line.split()
            key = _key_blob(fields[2:4]) if len(fields) >= 4 else None
            if key is None:
                continue
            if fields[0] == "@cert-authority":
                authorities.append(Authority(fields[1], key, f"{path}:{number}"))
            elif fields[0] == "@revoked":
                revoked.add(key)
    return KnownHosts(tuple(plain), tuple(authorities), frozenset(revoked))


def _key_blob(fields: Sequence[str]) -> bytes | None:
    """The blob of `TYPE BASE64` when it decodes and names that type, else None."""
    key_type, data = fields
    try:
        blob = base64.b64decode(data, validate=True)
        return blob if _Reader(blob).text() == key_type else None
    except (binascii.Error, ValueError):
        return None


def host_matches(patterns: str, name: str) -> bool:
    """OpenSSH's host pattern list: comma-separated, `*` and `?` wildcards, case-insensitive,
    `!` negating (a negated match refuses outright), `|1|SALT|HASH` hashed names."""
    name = name.lower()
    matched = False
    for item in patterns.split(","):
        negated = item.startswith("!")
        pattern = item.removeprefix("!")
        if pattern.startswith("|1|"):
            hit = _hashed_matches(pattern, name)
        else:
            wildcard = re.escape(pattern.lower()).replace(r"\*", ".*").replace(r"\?", ".")
            hit = re.fullmatch(wildcard, name) is not None
        if hit and negated:
            return False
        matched = matched or hit
    return matched


def _hashed_matches(pattern: str, name: str) -> bool:
    """`|1|base64(salt)|base64(HMAC-SHA1(salt, name))`, as ssh-keygen -H writes names."""
    try:
        salt, digest = (base64.b64decode(part) for part in pattern[3:].split("|", 1))
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)


class _Reader:
    """SSH wire fields (RFC 4251) from bytes; ValueError when they run short."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, count: int) -> bytes:
        if self.at + count > len(self.data):
            raise ValueError("the certificate is cut short")
        chunk = self.data[self.at : self.at + count]
        self.at += count
        return chunk

    def uint32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def uint64(self) -> int:
        value: int = struct.unpack(">Q", self.take(8))[0]
        return value

    def string(self) -> bytes:
        return self.take(self.uint32())

    def text(self) -> str:
        return self.string().decode("utf-8", "replace")

    def strings(self) -> list[bytes]:
        """A string that holds a list of strings."""
        inner = _Reader(self.string())
        items = []
        while inner.at < len(inner.data):
            items.append(inner.string())
        return items


@dataclass(frozen=True)
class Certificate:
    """An OpenSSH certificate's fields (PROTOCOL.certkeys)."""

    key_type: str
    key: bytes
    """The certified public key as a plain key blob (for @revoked)."""
    serial: int
    kind: int
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    critical_options: tuple[str, ...]
    ca_key: bytes
    signed: bytes
    """Every byte the CA's signature covers."""
    signature: bytes

    @property
    def signature_algorithm(self) -> str:
        return _Reader(self.signature).text()


def parse_certificate(blob: bytes) -> Certificate:
    """The certificate in blob; ValueError naming what is wrong with it."""
    reader = _Reader(blob)
    key_type = reader.text()
    plain_type = key_type.removesuffix(CERTIFICATE)
    if plain_type == key_type or plain_type not in _KEY_FIELDS:
        raise ValueError(f"{key_type!r} is not a certificate type this client knows")
    reader.string()  # nonce
    start = reader.at
    for _ in range(_KEY_FIELDS[plain_type]):
        reader.string()
    key = _string(plain_type.encode()) + blob[start : reader.at]
    serial, kind = reader.uint64(), reader.uint32()
    key_id = reader.text()
    principals = tuple(p.decode("utf-8", "replace") for p in reader.strings())
    valid_after, valid_before = reader.uint64(), reader.uint64()
    options = reader.strings()[::2]  # name, data, name, data ...
    reader.string()  # extensions
    reader.string()  # reserved
    ca_key = reader.string()
    signed = blob[: reader.at]
    signature = reader.string()
    if reader.at != len(blob):
        raise ValueError("the certificate has bytes after its signature")
    return Certificate(
        key_type,
        key,
        serial,
        kind,
        key_id,
        principals,
        valid_after,
        valid_before,
        tuple(o.decode("utf-8", "replace") for o in options),
        ca_key,
        signed,
        signature,
    )


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _sign_again(host: str, flags: str = "") -> str:
    return f"sign the host key again (ssh-keygen -s CA -I ID -h -n {host} {flags}HOST_KEY.pub)"


def _when(seconds: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(min(seconds, 253402300799)))


def check_host_certificate(
    certificate: Certificate,
    host: str,
    authorities: Sequence[Authority],
    *,
    revoked: frozenset[bytes],
    verify: Verify,
    now: float | None = None,
) -> None:
    """Trust certificate for host, or raise Untrusted with the reason. authorities are the
    `@cert-authority` lines that match the host; the principals must name host (one without
    principals is refused)."""
    now = time.time() if now is None else now
    if certificate.kind != HOST_CERTIFICATE:
        raise Untrusted(f"{certificate.key_id!r} is a user certificate, not a host certificate")
    if {certificate.key, certificate.ca_key} & revoked:
        raise Untrusted(f"{certificate.key_id!r} or its CA is marked @revoked in known_hosts")
    if certificate.ca_key not in {authority.key for authority in authorities}:
        listed = ", ".join(authority.where for authority in authorities)
        raise Untrusted(
            f"{certificate.key_id!r} is signed by a CA that known_hosts does not list for "
            f"{host} (its @cert-authority lines for it: {listed})"
        )
    if certificate.signature_algorithm == _SHA1_RSA:
        raise Untrusted(
            f"{certificate.key_id!r} is signed with ssh-rsa (SHA-1), which OpenSSH no longer "
            f"accepts from a CA; {_sign_again(host, '-t rsa-sha2-512 ')}"
        )
    if not verify(certificate.ca_key, certificate.signed, certificate.signature):
        raise Untrusted(f"{certificate.key_id!r}: the CA's signature does not verify")
    if now < certificate.valid_after:
        raise Untrusted(
            f"{certificate.key_id!r} is not valid before {_when(certificate.valid_after)}"
        )
    if now >= certificate.valid_before:
        raise Untrusted(
            f"{certificate.key_id!r} expired at {_when(certificate.valid_before)}; "
            + _sign_again(host, "-V +52w ")
        )
    if host.lower() not in (principal.lower() for principal in certificate.principals):
        named = ", ".join(certificate.principals) or "none"
        raise Untrusted(f"{certificate.key_id!r} names {named}, not {host}; {_sign_again(host)}")
    if certificate.critical_options:
        raise Untrusted(
            f"{certificate.key_id!r} has critical options a host certificate may not have: "
            + ", ".join(certificate.critical_options)
        )
