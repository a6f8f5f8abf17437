"""lab/apt_sources.py finds the Debian and Ubuntu archives and apt's proxy where apt on this host
has them (one-line and deb822 files, through apt-config, so APT_CONFIG redirects it all), the
environment overrides each, and a missing one stops lab/build-image.sh in one line naming its
variable; the image's recipe hash follows the resolved sources, not how they were written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lab.apt_sources import (
    DEBIAN_KEYRING,
    AptConfig,
    SourceError,
    archive,
    dearmor,
    image_sources,
    parse_deb822,
    parse_one_line,
    read_sources,
    ubuntu_archive,
)

ROOT = Path(__file__).resolve().parents[2]
BOOKWORM = {"ID": "debian", "VERSION_CODENAME": "bookworm"}
NOBLE = {"ID": "ubuntu", "VERSION_CODENAME": "noble"}
MIRROR = "http://mirror.example.org/debian"
SECURITY = "http://mirror.example.org/debian-security"
# A Debian host's deb822 sources, as Debian 12 writes them, and two vendors' beside them.
DEBIAN_SOURCES = f"""\
Types: deb
# a comment inside a stanza
URIs: {MIRROR}
Suites: bookworm bookworm-updates
Components: main
Signed-By: {DEBIAN_KEYRING}

Types: deb
URIs: {SECURITY}
Suites: bookworm-security
Components: main
Signed-By: {DEBIAN_KEYRING}
"""
VENDOR_SOURCES = """\
Types: deb
URIs: https://vendor.example.org/apt
Suites: bookworm
Components: stable
Signed-By: /usr/share/keyrings/vendor.gpg

Types: deb
Enabled: no
URIs: https://other.example.org/debian
Suites: bookworm
Components: main
"""
# A made-up key: armor headers, an empty line, base64 and the checksum line.
KEY = """\
-----BEGIN PGP PUBLIC KEY BLOCK-----
Comment: site mirror

bWFkZS11cC1rZXktYnl0ZXM=
=abcd
-----END PGP PUBLIC KEY BLOCK-----"""


def _config(tmp_path: Path) -> AptConfig:
    return AptConfig(source_list=tmp_path / "sources.list", source_parts=tmp_path / "parts")


def test_one_line_entries_with_options_and_comments() -> None:
    text = (
        "# deb http://old.example.org/debian buster main\n"
        "deb [ arch=amd64 signed-by=/etc/keys/site.gpg ] http://m.example.org/debian"
        " bookworm main contrib\n"
        "deb-src http://m.example.org/debian bookworm main\n"
        "deb [trusted=yes] file:/srv/repo ./  # a flat repository\n"
    )
    first, flat = parse_one_line(text, "sources.list")
    assert first.uris == ("http://m.example.org/debian",) and first.suites == ("bookworm",)
    assert first.components == ("main", "contrib") and first.signed_by == "/etc/keys/site.gpg"
    assert first.where == "sources.list:2" and not first.trusted
    assert flat.uris == ("file:/srv/repo",) and flat.suites == ("./",) and flat.trusted


def test_deb822_stanzas_skip_disabled_and_keep_an_embedded_key() -> None:
    text = VENDOR_SOURCES + "\nTypes: deb\nURIs: http://m.example.org/d\nSuites: bookworm\n"
    text += "Components: main\nSigned-By:\n" + "".join(
        f" {line or '.'}\n" for line in KEY.splitlines()
    )
    vendor, site = parse_deb822(text, "x.sources")
    assert vendor.components == ("stable",) and vendor.where == "x.sources:1"
    assert site.signed_by == KEY and site.keyrings == []
    assert dearmor(site.signed_by) == b"made-up-key-bytes"


def test_the_debian_archive_is_told_from_vendors_and_files_apt_ignores(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts/debian.sources").write_text(DEBIAN_SOURCES)
    (tmp_path / "parts/a-vendor.sources").write_text(VENDOR_SOURCES)
    # apt reads no file of another extension: neither does the lab.
    (tmp_path / "parts/old.list.disabled").write_text(
        "deb http://old.example.org/debian bookworm main\n"
    )
    sources = read_sources(_config(tmp_path))
    assert [s.where.rsplit("/", 1)[-1] for s in sources] == [
        "a-vendor.sources:1", "debian.sources:1", "debian.sources:8"]  # fmt: skip
    main = archive(sources, "debian", BOOKWORM)
    security = archive(sources, "debian", BOOKWORM, security=True)
    assert main is not None and main.uris == (MIRROR,)
    assert security is not None and security.uris == (SECURITY,)
    # Another distribution's host finds it by its keyring; an Ubuntu archive is not there.
    assert archive(sources, "debian", NOBLE) == main
    assert archive(sources, "ubuntu", BOOKWORM) is None


def test_the_image_of_another_suite_takes_this_hosts_mirrors(tmp_path: Path) -> None:
    sources = parse_deb822(DEBIAN_SOURCES, "debian.sources")
    chosen = image_sources("trixie", _config(tmp_path), sources, BOOKWORM, {})
    assert chosen.text == (
        f"Types: deb\nURIs: {MIRROR}\nSuites: trixie trixie-updates\nComponents: main\n"
        f"Signed-By: {DEBIAN_KEYRING}\n\n"
        f"Types: deb\nURIs: {SECURITY}\nSuites: trixie-security\nComponents: main\n"
        f"Signed-By: {DEBIAN_KEYRING}\n"
    )
    assert chosen.mirror == MIRROR and chosen.debootstrap_args == (f"--keyring={DEBIAN_KEYRING}",)
    assert chosen.copy_keyrings == () and chosen.proxy == ""


def test_one_line_sources_give_the_same_image_sources_as_deb822(tmp_path: Path) -> None:
    one_line = parse_one_line(
        f"deb [signed-by={DEBIAN_KEYRING}] {MIRROR} bookworm main\n"
        f"deb [signed-by={DEBIAN_KEYRING}] {MIRROR} bookworm-updates main\n"
        f"deb [signed-by={DEBIAN_KEYRING}] {SECURITY} bookworm-security main\n",
        "sources.list",
    )
    deb822 = parse_deb822(DEBIAN_SOURCES, "debian.sources")
    config = _config(tmp_path)
    assert (
        image_sources("bookworm", config, one_line, BOOKWORM, {}).text
        == image_sources("bookworm", config, deb822, BOOKWORM, {}).text
    )


def test_a_site_key_and_a_trusted_flat_copy(tmp_path: Path) -> None:
    keyring = tmp_path / "site-archive.gpg"
    keyring.write_bytes(b"key")
    site = parse_one_line(
        f"deb [signed-by={keyring}] http://cache.example.org/debian bookworm main\n"
        "deb [trusted=yes] file:/srv/debian-security bookworm-security main\n",
        "sources.list",
    )
    chosen = image_sources("bookworm", _config(tmp_path), site, BOOKWORM, {})
    assert chosen.debootstrap_args == (f"--keyring={keyring}",)
    assert chosen.copy_keyrings == (str(keyring),)  # the image lacks it: copied in
    security = "URIs: file:/srv/debian-security\nSuites: bookworm-security\nComponents: main\n"
    assert security + "Trusted: yes\n" in chosen.text
    keyring.unlink()
    with pytest.raises(SourceError, match=f"Signed-By names {keyring}, which this host lacks"):
        image_sources("bookworm", _config(tmp_path), site, BOOKWORM, {})


def test_the_environment_overrides_and_none(tmp_path: Path) -> None:
    environ = {"GPULAB_DEBIAN_MIRROR": "file:/srv/debian", "GPULAB_DEBIAN_SECURITY_MIRROR": "none",
               "GPULAB_APT_PROXY": "http://proxy.example.org:3142"}  # fmt: skip
    chosen = image_sources("bookworm", _config(tmp_path), [], BOOKWORM, environ)
    assert chosen.text == (
        "Types: deb\nURIs: file:/srv/debian\nSuites: bookworm bookworm-updates\n"
        f"Components: main\nSigned-By: {DEBIAN_KEYRING}\n"
    )
    assert chosen.proxy == "http://proxy.example.org:3142"
    config = AptConfig(tmp_path / "l", tmp_path / "p", proxy="http://proxy.example.org:3128")
    no_proxy = environ | {"GPULAB_APT_PROXY": "none"}
    assert image_sources("bookworm", config, [], BOOKWORM, no_proxy).proxy == ""
    ubuntu = {"GPULAB_UBUNTU_MIRROR": "file:/srv/u"}
    assert ubuntu_archive(config, [], BOOKWORM, ubuntu) == "file:/srv/u"


@pytest.mark.parametrize(
    ("sources", "variable"),
    [
        ("", "GPULAB_DEBIAN_MIRROR"),
        (DEBIAN_SOURCES.split("\n\n", maxsplit=1)[0] + "\n", "GPULAB_DEBIAN_SECURITY_MIRROR"),
    ],
    ids=["no-archive", "no-security-archive"],
)
def test_a_missing_source_is_one_line_naming_its_variable(
    tmp_path: Path, sources: str, variable: str
) -> None:
    with pytest.raises(SourceError) as refused:
        image_sources("bookworm", _config(tmp_path), parse_deb822(sources, "d"), BOOKWORM, {})
    assert variable in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(SourceError, match="set GPULAB_UBUNTU_MIRROR"):
        ubuntu_archive(_config(tmp_path), parse_deb822(DEBIAN_SOURCES, "d"), BOOKWORM, {})


def test_an_ubuntu_hosts_own_archive(tmp_path: Path) -> None:
    ubuntu = parse_deb822(
        "Types: deb\nURIs: http://ubuntu.example.org/ubuntu\nSuites: noble noble-updates\n"
        "Components: main universe\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n",
        "ubuntu.sources",
    )
    assert (
        ubuntu_archive(_config(tmp_path), ubuntu, NOBLE, {}) == "http://ubuntu.example.org/ubuntu"
    )


# --- lab/build-image.sh, with apt's configuration redirected (APT_CONFIG) and podman faked ---

# Answers `image exists` yes, so that the script stops at "up to date" after naming the image.
FAKE = """#!/bin/sh
echo "$(basename "$0") $*" >> "$FAKE_CALLS"
case "$(basename "$0") $1 $2" in "podman image exists") exit 0 ;; podman*) exit 0 ;; esac
exit 97
"""


def _build_image(tmp_path: Path, sources: dict[str, str], conf: str = "", **env: str):
    etc = tmp_path / "etc/apt"
    for name in ("sources.list.d", "apt.conf.d"):
        (etc / name).mkdir(parents=True, exist_ok=True)
    for name, text in sources.items():
        (etc / name).write_text(text)
    (etc / "apt.conf.d/50site").write_text(conf)
    (tmp_path / "apt.conf").write_text(f'Dir::Etc "{etc}/";\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("podman", "debootstrap"):
        (bin_dir / tool).write_text(FAKE)
        (bin_dir / tool).chmod(0o755)
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GPULAB_", "APT_"))}
    run = subprocess.run(
        ["bash", "lab/build-image.sh"], cwd=ROOT, capture_output=True, text=True, check=False,
        env=clean | {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_CALLS": str(calls),
                     "APT_CONFIG": str(tmp_path / "apt.conf"),
                     "GPULAB_APT_CACHE": str(tmp_path / "debs"),
                     "GPULAB_IMAGE_REPO": "localhost/gpulab-test-never-built"} | env,
    )  # fmt: skip
    exists = [line for line in calls.read_text().splitlines()] if calls.exists() else []
    return run, [line.split()[-1] for line in exists if line.startswith("podman image exists")]


def test_build_image_stops_in_one_line_without_a_debian_source(tmp_path: Path) -> None:
    run, images = _build_image(tmp_path, {})
    assert run.returncode == 1 and images == []
    assert run.stderr.strip() == (
        f"apt_sources.py: no Debian archive among this host's apt sources ({tmp_path}/etc/apt/"
        f"sources.list, {tmp_path}/etc/apt/sources.list.d): set GPULAB_DEBIAN_MIRROR to its "
        "URI (a mirror's, or file:/PATH of a copy)"
    )


def test_the_image_hash_follows_the_resolved_sources_not_their_form(tmp_path: Path) -> None:
    deb822 = {"sources.list.d/debian.sources": DEBIAN_SOURCES}
    one_line = {"sources.list": (
        f"deb [signed-by={DEBIAN_KEYRING}] {MIRROR} bookworm main\n"
        f"deb [signed-by={DEBIAN_KEYRING}] {MIRROR} bookworm-updates main\n"
        f"deb [signed-by={DEBIAN_KEYRING}] {SECURITY} bookworm-security main\n")}  # fmt: skip
    images = {}
    for case, sources, conf, env in [
        ("deb822", deb822, "", {}),
        ("one-line", one_line, "", {}),
        ("environment", {}, "", {"GPULAB_DEBIAN_MIRROR": MIRROR,
                                 "GPULAB_DEBIAN_SECURITY_MIRROR": SECURITY}),
        ("another-mirror", {}, "", {"GPULAB_DEBIAN_MIRROR": "http://cache.example.org/debian",
                                    "GPULAB_DEBIAN_SECURITY_MIRROR": SECURITY}),
        ("proxy", deb822, 'Acquire::http::Proxy "http://proxy.example.org:3142";\n', {}),
    ]:  # fmt: skip
        work = tmp_path / case
        run, named = _build_image(work, sources, conf, **env)
        assert run.returncode == 0, run.stderr
        (images[case],) = named
    assert images["deb822"] == images["one-line"] == images["environment"]
    assert len({images["deb822"], images["another-mirror"], images["proxy"]}) == 3


def test_a_loopback_proxy_is_named_as_unreachable_from_containers(tmp_path: Path) -> None:
    run, _ = _build_image(
        tmp_path, {"sources.list.d/debian.sources": DEBIAN_SOURCES},
        'Acquire::http::Proxy "http://127.0.0.1:3142";\n',
    )  # fmt: skip
    assert run.returncode == 0
    assert "proxy http://127.0.0.1:3142 is on this host's loopback" in run.stderr
    assert "set GPULAB_APT_PROXY" in run.stderr


def test_a_scenario_without_its_packages_stops_before_any_container(tmp_path: Path) -> None:
    """upgrade-path needs Slurm 23.11 from an Ubuntu archive: with none in apt's sources (here
    none at all) and no GPULAB_UBUNTU_MIRROR, lab/molecule-test.sh stops in one line that names
    the variable and the repository's directory, before podman is asked anything."""
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)
    (tmp_path / "apt.conf").write_text(f'Dir::Etc "{tmp_path}/etc/apt/";\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(FAKE)
    (bin_dir / "podman").chmod(0o755)
    calls = tmp_path / "calls"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GPULAB_", "APT_"))}
    run = subprocess.run(
        ["bash", "lab/molecule-test.sh", "--scenario", "upgrade-path"], cwd=ROOT,
        capture_output=True, text=True, check=False,
        env=clean | {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_CALLS": str(calls),
                     "APT_CONFIG": str(tmp_path / "apt.conf"),
                     "GPULAB_SLURM_2311_REPO": str(tmp_path / "slurm-23.11")},
    )  # fmt: skip
    assert run.returncode == 1 and not calls.exists()
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("slurm-23.11-repo.sh: Slurm 23.11 comes from Ubuntu 24.04's archive")
    assert "set GPULAB_UBUNTU_MIRROR" in line and f"{tmp_path}/slurm-23.11" in line
