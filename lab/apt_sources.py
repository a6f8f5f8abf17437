"""This host's package sources, for the lab's image and the scenarios that need more packages:
where the Debian (and Ubuntu) archives are, as apt on this host reaches them, and apt's HTTP
proxy, each overridden by an environment variable. The tree names no archive host: a lab behind
a local mirror, an apt proxy or without internet builds from what this host's apt uses.

apt's configuration is read as apt reads it: `apt-config` names the files (Dir::Etc::sourcelist,
Dir::Etc::sourceparts, so APT_CONFIG is honoured) and the proxy (Acquire::http::Proxy); the files
are one-line (sources.list, *.list) or deb822 (*.sources), whose Enabled: no stanzas are skipped.
A distribution's archive is the first enabled entry with component main signed by its archive
keyring (Signed-By .../debian-archive-keyring.gpg) or, on a host of that distribution, with its
release's suite; its security archive the same with a -security suite.

Environment (docs/operations.md, "Mirrors, proxies and air-gapped sites"):
    GPULAB_DEBIAN_MIRROR           the Debian archive's URI (a mirror, or file:/PATH of a copy)
    GPULAB_DEBIAN_SECURITY_MIRROR  Debian's security archive's URI, or `none` (no security updates)
    GPULAB_DEBIAN_KEYRING          the keyring that signs those two (default: Debian's own)
    GPULAB_UBUNTU_MIRROR           Ubuntu's archive's URI (lab/slurm-23.11-repo.sh)
    GPULAB_APT_PROXY               apt's HTTP proxy for the image's build and inside it, or `none`

Usage:
    python3 lab/apt_sources.py image SUITE DIR   lab/build-image.sh's sources for a Debian SUITE
        image: writes DIR/debian.sources (the image's) and DIR/keyring.gpg where the archive's key
        is written into this host's sources; prints bash assignments (mirror, debootstrap_args,
        proxy, copy_keyrings)
    python3 lab/apt_sources.py archive ubuntu    the Ubuntu archive's URI
Where a source is not found: one line on stderr that names the variable providing it, exit 1.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# The names apt reads in sources.list.d (others it ignores, e.g. foo.list.disabled).
PART_NAME = re.compile(r"[A-Za-z0-9_.-]+\.(list|sources)")
SECURITY_SUITE = re.compile(r"-security$|/updates$")
NO_PROXY = {"", "DIRECT", "false", "none"}
ARMORED_KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----"


class SourceError(Exception):
    """A source this host's apt configuration does not give, nor the environment: one line."""


@dataclass(frozen=True)
class Source:
    """One enabled `deb` entry of apt's sources."""

    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...] = ()
    # Keyring paths or fingerprints (comma- or space-separated), or an ASCII-armored key.
    signed_by: str = ""
    trusted: bool = False
    where: str = ""  # FILE:LINE, for messages

    @property
    def keyrings(self) -> list[str]:
        """The keyring files Signed-By names (none for an armored key or fingerprints)."""
        if ARMORED_KEY in self.signed_by:
            return []
        return [item for item in re.split(r"[,\s]+", self.signed_by) if item.startswith("/")]


@dataclass(frozen=True)
class AptConfig:
    """What apt on this host reads: its source files and its HTTP proxy."""

    source_list: Path
    source_parts: Path
    proxy: str = ""

    @property
    def described(self) -> str:
        return f"{self.source_list}, {self.source_parts}"


def parse_one_line(text: str, where: str) -> list[Source]:
    """The `deb` entries of a one-line sources file (sources.list(5))."""
    sources = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb ") and not line.startswith("deb\t"):
            continue
        rest = line[3:].strip()
        options: dict[str, str] = {}
        if rest.startswith("["):
            inside, _, rest = rest[1:].partition("]")
            for option in inside.split():
                key, _, value = option.partition("=")
                options[key.rstrip("+-").lower()] = value
        words = rest.split()
        if len(words) < 2:
            continue
        sources.append(
            Source(
                uris=(words[0],),
                suites=(words[1],),
                components=tuple(words[2:]),
                signed_by=options.get("signed-by", ""),
                trusted=options.get("trusted", "").lower() == "yes",
                where=f"{where}:{number}",
            )
        )
    return sources


def _stanzas(text: str) -> list[tuple[int, dict[str, str]]]:
    """deb822 stanzas: (first line, {lower-case field: value}), continuation lines joined with
    newlines (a line of ' .' is an empty one), comment lines dropped."""
    stanzas: list[tuple[int, dict[str, str]]] = []
    fields: dict[str, str] = {}
    start, key = 0, ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if fields:
                stanzas.append((start, fields))
            fields, key = {}, ""
            continue
        if line[0] in " \t" and key:
            body = line.strip()
            fields[key] += "\n" + ("" if body == "." else body)
            continue
        name, _, value = line.partition(":")
        key = name.strip().lower()
        start = start if fields else number
        fields[key] = value.strip()
    if fields:
        stanzas.append((start, fields))
    return stanzas


def parse_deb822(text: str, where: str) -> list[Source]:
    """The enabled `deb` entries of a deb822 sources file."""
    sources = []
    for number, fields in _stanzas(text):
        if fields.get("enabled", "yes").strip().lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        sources.append(
            Source(
                uris=tuple(fields.get("uris", "").split()),
                suites=tuple(fields.get("suites", "").split()),
                components=tuple(fields.get("components", "").split()),
                signed_by=fields.get("signed-by", "").strip(),
                trusted=fields.get("trusted", "").strip().lower() == "yes",
                where=f"{where}:{number}",
            )
        )
    return [s for s in sources if s.uris and s.suites]


def read_sources(config: AptConfig) -> list[Source]:
    """Every enabled `deb` entry apt reads on this host, in apt's order."""
    sources: list[Source] = []
    if config.source_list.is_file():
        sources += parse_one_line(config.source_list.read_text(), str(config.source_list))
    if config.source_parts.is_dir():
        for path in sorted(config.source_parts.iterdir()):
            if not PART_NAME.fullmatch(path.name) or not path.is_file():
                continue
            parse = parse_deb822 if path.suffix == ".sources" else parse_one_line
            sources += parse(path.read_text(), str(path))
    return sources


def apt_config() -> AptConfig:
    """apt's source files and HTTP proxy on this host (APT_CONFIG honoured, as apt does)."""
    names = [
        "L",
        "Dir::Etc::sourcelist/f",
        "P",
        "Dir::Etc::sourceparts/d",
        "X",
        "Acquire::http::Proxy",
    ]
    try:
        shown = subprocess.run(
            ["apt-config", "shell", *names], check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise SourceError(f"cannot read apt's configuration (apt-config: {error})") from error
    values = {}
    for line in shown.splitlines():
        name, _, quoted = line.partition("=")
        values[name] = (shlex.split(quoted) or [""])[0]
    return AptConfig(
        source_list=Path(values.get("L") or "/etc/apt/sources.list"),
        source_parts=Path(values.get("P") or "/etc/apt/sources.list.d"),
        proxy=values.get("X", ""),
    )


def os_release(path: Path = Path("/etc/os-release")) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        name, _, value = line.partition("=")
        if name and value:
            values[name.strip()] = (shlex.split(value) or [""])[0]
    return values


def archive(
    sources: list[Source], distribution: str, release: dict[str, str], *, security: bool = False
) -> Source | None:
    """The first entry of `distribution`'s archive (its security archive with `security`):
    component main (or none: a flat copy) and a suite of that kind, signed by the
    distribution's archive keyring, else on a host of that distribution with its release's
    suite (unsigned entries before those signed by another keyring)."""
    codename = release.get("VERSION_CODENAME", "") if release.get("ID") == distribution else ""
    keyring = f"{distribution}-archive-keyring"

    def fits(source: Source) -> bool:
        kinds = [bool(SECURITY_SUITE.search(suite)) for suite in source.suites]
        return (security in kinds) and (not source.components or "main" in source.components)

    def release_suite(source: Source) -> bool:
        return bool(codename) and any(
            suite == codename
            or suite.startswith(f"{codename}-")
            or suite.startswith(f"{codename}/")
            for suite in source.suites
        )

    ranked = [
        [s for s in sources if keyring in s.signed_by],
        [s for s in sources if not s.signed_by and release_suite(s)],
        [s for s in sources if release_suite(s)],
    ]
    return next((s for group in ranked for s in group if fits(s)), None)


def proxy(config: AptConfig, environ: dict[str, str]) -> str:
    """apt's HTTP proxy for the lab: GPULAB_APT_PROXY (none: no proxy), else this host's."""
    chosen = environ.get("GPULAB_APT_PROXY", config.proxy).strip()
    return "" if chosen in NO_PROXY else chosen


def loopback_proxy(url: str) -> bool:
    """Whether the proxy is on this host's loopback, which a container cannot reach."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def dearmor(key: str) -> bytes:
    """The binary keyring of an ASCII-armored public key block (as `gpg --dearmor`)."""
    lines = key.strip().splitlines()
    try:
        body = lines[lines.index("") + 1 :]  # after the armor headers' empty line
    except ValueError:
        body = lines[1:]
    data = "".join(line for line in body if not line.startswith(("-----", "=")))
    return base64.b64decode(data)


@dataclass(frozen=True)
class ImageSources:
    """What lab/build-image.sh needs: the image's deb822 sources, debootstrap's mirror and
    options, the keyring files to copy into the image, apt's proxy."""

    text: str
    mirror: str
    debootstrap_args: tuple[str, ...]
    copy_keyrings: tuple[str, ...]
    armored_key: str  # written to DIR/keyring.gpg for debootstrap
    proxy: str


def _stanza(source: Source, suites: list[str]) -> str:
    lines = [
        "Types: deb",
        f"URIs: {' '.join(source.uris)}",
        f"Suites: {' '.join(suites)}",
    ]
    if source.components:
        lines.append(f"Components: {' '.join(source.components)}")
    if source.trusted:
        lines.append("Trusted: yes")
    if ARMORED_KEY in source.signed_by:
        key = [line if line else "." for line in source.signed_by.strip().splitlines()]
        lines.append("Signed-By:\n" + "\n".join(f" {line}" for line in key))
    elif source.signed_by:
        lines.append(f"Signed-By: {source.signed_by}")
    return "\n".join(lines) + "\n"


def _described(config: AptConfig) -> str:
    return f"this host's apt sources ({config.described})"


def image_sources(
    suite: str, config: AptConfig, sources: list[Source], release: dict[str, str],
    environ: dict[str, str],
) -> ImageSources:  # fmt: skip
    """The Debian SUITE image's sources: the archive (SUITE and, where this host's archive entry
    has an -updates suite or the archive comes from GPULAB_DEBIAN_MIRROR, SUITE-updates) and the
    security archive (SUITE-security), each from the environment or this host's apt."""
    keyring = environ.get("GPULAB_DEBIAN_KEYRING") or DEBIAN_KEYRING
    uri = environ.get("GPULAB_DEBIAN_MIRROR", "").strip()
    if uri:
        main = Source(uris=(uri,), suites=(suite, f"{suite}-updates"), components=("main",),
                      signed_by=keyring, where="GPULAB_DEBIAN_MIRROR")  # fmt: skip
        main_suites = [suite, f"{suite}-updates"]
    else:
        found = archive(sources, "debian", release)
        if found is None:
            raise SourceError(
                f"no Debian archive among {_described(config)}: set GPULAB_DEBIAN_MIRROR to its "
                "URI (a mirror's, or file:/PATH of a copy)"
            )
        main = found
        # One stanza in deb822, one line per suite in the one-line format.
        updates = any(
            suite.endswith("-updates") for s in sources if s.uris == main.uris for suite in s.suites
        )
        main_suites = [suite, *([f"{suite}-updates"] if updates else [])]
    security_uri = environ.get("GPULAB_DEBIAN_SECURITY_MIRROR", "").strip()
    security: Source | None
    if security_uri == "none":
        security = None
    elif security_uri:
        security = Source(uris=(security_uri,), suites=(f"{suite}-security",),
                          components=("main",), signed_by=keyring,
                          where="GPULAB_DEBIAN_SECURITY_MIRROR")  # fmt: skip
    else:
        security = archive(sources, "debian", release, security=True)
        if security is None:
            raise SourceError(
                f"no Debian security archive among {_described(config)}: set "
                "GPULAB_DEBIAN_SECURITY_MIRROR to its URI, or to none for an image without "
                "security updates"
            )
    text = _stanza(main, main_suites)
    if security is not None:
        text += "\n" + _stanza(security, [f"{suite}-security"])
    chosen = [main] + ([security] if security else [])
    missing = [(s, k) for s in chosen for k in s.keyrings if not Path(k).is_file()]
    if missing:
        source, path = missing[0]
        raise SourceError(
            f"{source.where}: Signed-By names {path}, which this host lacks (install the "
            "keyring, or set GPULAB_DEBIAN_KEYRING to one)"
        )
    args: list[str] = []
    if main.trusted:
        args.append("--no-check-gpg")
    elif main.keyrings:
        args.append(f"--keyring={main.keyrings[0]}")
    copy = sorted({k for s in chosen for k in s.keyrings if k != DEBIAN_KEYRING})
    armored = main.signed_by if ARMORED_KEY in main.signed_by and not main.trusted else ""
    return ImageSources(
        text=text,
        mirror=main.uris[0],
        debootstrap_args=tuple(args),
        copy_keyrings=tuple(copy),
        armored_key=armored,
        proxy=proxy(config, environ),
    )


def ubuntu_archive(
    config: AptConfig, sources: list[Source], release: dict[str, str], environ: dict[str, str]
) -> str:
    """The Ubuntu archive's URI: GPULAB_UBUNTU_MIRROR, else this host's Ubuntu archive entry."""
    uri = environ.get("GPULAB_UBUNTU_MIRROR", "").strip()
    if uri:
        return uri
    found = archive(sources, "ubuntu", release)
    if found is None:
        raise SourceError(
            f"no Ubuntu archive among {_described(config)}: set GPULAB_UBUNTU_MIRROR to its URI "
            "(a mirror's, or file:/PATH of a copy)"
        )
    return found.uris[0]


def _bash(name: str, value: str | tuple[str, ...]) -> str:
    if isinstance(value, tuple):
        return f"{name}=(" + " ".join(shlex.quote(v) for v in value) + ")\n"
    return f"{name}={shlex.quote(value)}\n"


USAGE = "usage: apt_sources.py image SUITE DIR | archive ubuntu"


def main(argv: list[str]) -> int:
    environ = dict(os.environ)
    try:
        match argv[1:]:
            case ["image", suite, directory]:
                config = apt_config()
                chosen = image_sources(suite, config, read_sources(config), os_release(), environ)
                out = Path(directory)
                (out / "debian.sources").write_text(chosen.text)
                args = chosen.debootstrap_args
                if chosen.armored_key:
                    (out / "keyring.gpg").write_bytes(dearmor(chosen.armored_key))
                    args += (f"--keyring={out / 'keyring.gpg'}",)
                if chosen.proxy and loopback_proxy(chosen.proxy):
                    print(
                        f"apt_sources.py: warning: apt's proxy {chosen.proxy} is on this host's "
                        "loopback, which the lab's containers cannot reach: set GPULAB_APT_PROXY "
                        "to an address they reach",
                        file=sys.stderr,
                    )
                sys.stdout.write(
                    _bash("mirror", chosen.mirror)
                    + _bash("debootstrap_args", args)
                    + _bash("proxy", chosen.proxy)
                    + _bash("copy_keyrings", chosen.copy_keyrings)
                )
            case ["archive", "ubuntu"]:
                config = apt_config()
                print(ubuntu_archive(config, read_sources(config), os_release(), environ))
            case _:
                print(USAGE, file=sys.stderr)
                return 2
    except SourceError as error:
        print(f"apt_sources.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
