"""gpulab.submit.host_certificates on what ssh-keygen writes: certificates parsed field by
field, known_hosts host patterns (hashed ones from ssh-keygen -H), marker lines, and the
checks a connection's certificate must pass (the connections: test_submit_ssh.py)."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
from gpulab.submit.host_certificates import (
    FOREVER,
    HOST_CERTIFICATE,
    Authority,
    Untrusted,
    check_host_certificate,
    host_matches,
    parse_certificate,
    read_known_hosts,
)

pytestmark = pytest.mark.skipif(
    shutil.which("ssh-keygen") is None, reason="OpenSSH's ssh-keygen is missing"
)


def keygen(folder: Path, name: str, key_type: str = "ed25519") -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", name, "-f", str(folder / name)],
        check=True,
    )
    return folder / name


def blob(path: Path) -> bytes:
    """The key or certificate blob of a .pub file."""
    return base64.b64decode(path.read_text().split()[1])


def sign(ca: Path, key: Path, *flags: str) -> bytes:
    subprocess.run(["ssh-keygen", "-q", "-s", str(ca), *flags, f"{key}.pub"], check=True)
    return blob(key.with_name(f"{key.name}-cert.pub"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("certificates")
    keygen(folder, "ca")
    keygen(folder, "host")
    return folder


def test_a_certificate_is_read_field_by_field(folder: Path) -> None:
    flags = ["-I", "controller-1", "-h", "-n", "controller,10.0.0.5", "-z", "42"]
    certificate = parse_certificate(sign(folder / "ca", folder / "host", *flags))
    assert certificate.key_type == "ssh-ed25519-cert-v01@openssh.com"
    assert certificate.key == blob(folder / "host.pub")
    assert certificate.ca_key == blob(folder / "ca.pub")
    assert (certificate.serial, certificate.kind, certificate.key_id) == (
        42,
        HOST_CERTIFICATE,
        "controller-1",
    )
    assert certificate.principals == ("controller", "10.0.0.5")
    assert (certificate.valid_after, certificate.valid_before) == (0, FOREVER)
    assert certificate.critical_options == ()
    assert certificate.signature_algorithm == "ssh-ed25519"


def test_a_plain_key_or_a_cut_certificate_is_not_read(folder: Path) -> None:
    with pytest.raises(ValueError, match="is not a certificate type"):
        parse_certificate(blob(folder / "ca.pub"))
    whole = sign(folder / "ca", folder / "host", "-I", "cut", "-h", "-n", "controller")
    with pytest.raises(ValueError, match="cut short"):
        parse_certificate(whole[:-10])


@pytest.mark.parametrize(
    ("patterns", "name", "matches"),
    [
        ("controller", "controller", True),
        ("controller", "controller2", False),
        ("*.lab", "node1.lab", True),
        ("*.LAB", "node1.lab", True),
        ("node?.lab", "node12.lab", False),
        ("*.lab,!login.lab", "login.lab", False),
        ("!login.lab,*.lab", "node1.lab", True),
        ("[127.0.0.1]:*", "[127.0.0.1]:2222", True),
        ("127.0.0.1", "[127.0.0.1]:2222", False),
        ("a.b", "axb", False),
    ],
)
def test_host_patterns_match_as_in_known_hosts(patterns: str, name: str, matches: bool) -> None:
    assert host_matches(patterns, name) is matches


def test_a_name_hashed_by_ssh_keygen_matches(folder: Path, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"controller.lab {(folder / 'ca.pub').read_text()}")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known_hosts)], check=True)
    hashed = known_hosts.read_text().split()[0]
    assert hashed.startswith("|1|")
    assert host_matches(hashed, "controller.lab")
    assert not host_matches(hashed, "other.lab")


def test_known_hosts_are_split_into_keys_authorities_and_revocations(
    folder: Path, tmp_path: Path
) -> None:
    ca = (folder / "ca.pub").read_text().strip()
    host = " ".join((folder / "host.pub").read_text().split()[:2])
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(
        "# a comment\n\n"
        f"@cert-authority *.lab,10.0.0.* {ca}\n"
        f"@revoked * {host}\n"
        "@cert-authority *.lab ssh-ed25519 not-base64\n"
        "@unknown-marker * ssh-ed25519 AAAA\n"
        f"controller {host}\n"
    )
    known = read_known_hosts([str(tmp_path / "missing"), str(known_hosts)])
    assert known.plain == ((7, f"controller {host}"),)
    assert known.authorities == (
        Authority("*.lab,10.0.0.*", blob(folder / "ca.pub"), f"{known_hosts}:3"),
    )
    assert known.revoked == {blob(folder / "host.pub")}
    assert [a.where for a in known.authorities_for("node1.lab")] == [f"{known_hosts}:3"]
    assert known.authorities_for("controller") == []
    with pytest.raises(FileNotFoundError):
        read_known_hosts([str(tmp_path / "missing")], strict=True)


def _check(certificate: bytes, folder: Path, now: float | None = None) -> None:
    """The checks for host `controller`, signatures verified by paramiko's key classes."""
    pytest.importorskip("paramiko", reason="paramiko (gpulab[submit]) is missing")
    from gpulab.submit.ssh_trust import verify_signature  # noqa: PLC0415 - needs paramiko

    authority = Authority("*", blob(folder / "ca.pub"), "known_hosts:1")
    check_host_certificate(
        parse_certificate(certificate),
        "controller",
        [authority],
        revoked=frozenset(),
        verify=verify_signature,
        now=now,
    )


def test_a_good_certificate_passes_at_the_edges_of_its_validity(folder: Path) -> None:
    flags = ["-I", "window", "-h", "-n", "controller", "-V", "20300101:20300102"]
    certificate = sign(folder / "ca", folder / "host", *flags)
    parsed = parse_certificate(certificate)
    _check(certificate, folder, now=parsed.valid_after)
    with pytest.raises(Untrusted, match="'window' expired at 2030-01-0"):
        _check(certificate, folder, now=parsed.valid_before)
    with pytest.raises(Untrusted, match="'window' is not valid before 2030-01-0"):
        _check(certificate, folder, now=parsed.valid_after - 1)


def test_a_certificate_changed_after_signing_is_refused(folder: Path) -> None:
    certificate = sign(folder / "ca", folder / "host", "-I", "forged", "-h", "-n", "controllex")
    forged = certificate.replace(b"controllex", b"controller")
    with pytest.raises(Untrusted, match="'forged': the CA's signature does not verify"):
        _check(forged, folder)


def test_a_sha1_rsa_signature_is_refused(folder: Path) -> None:
    rsa_ca = keygen(folder, "rsa_ca", "rsa")
    flags = ["-I", "sha1", "-h", "-n", "controller", "-t", "ssh-rsa"]
    certificate = sign(rsa_ca, folder / "host", *flags)
    authority = Authority("*", blob(folder / "rsa_ca.pub"), "known_hosts:1")
    with pytest.raises(Untrusted, match=r"'sha1' is signed with ssh-rsa \(SHA-1\)"):
        check_host_certificate(
            parse_certificate(certificate),
            "controller",
            [authority],
            revoked=frozenset(),
            verify=lambda *_: True,
        )
