"""No package mirror or registry host is written in the tree (issue 47, air-gapped and mirrored
sites): the lab, the scenarios and the roles take their package sources from this host's apt
configuration or from variables the user sets (docs/operations.md, "Mirrors, proxies and
air-gapped sites"), so a cluster behind a local mirror or without internet needs no edit.

Two checks. Every file of the tree (tracked, or new and not ignored) is searched for host names
of public package hosts; their list is kept here as hashes, so that this file names none of
them either (a name matches when it or one of its parent domains does). And the lab, the
scenarios, the collection, the scripts and the docs write no URL with a literal host beyond
an allow-list of hosts that serve no packages: a mirror this list does not know is caught too.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# sha256 (first 16 hex digits) of public package hosts and of the domains whose every host
# serves packages or mirrors (distributions' archives, language registries, image registries,
# vendors' apt repositories). To add one, the digest of NAME:
#   python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16])' \
#     NAME
PACKAGE_HOSTS = frozenset({
    "75adac515f0bd3db", "6f43afdf2d19b5e3", "344aa72d23ae6fdb", "9e21a1eb1c7efc50",
    "2b72b7966354f458", "4ea8acbe7a9cb3ca", "a4aa2ac280bb8d1a", "8b5bb5eb9d758455",
    "7412833208a50156", "8743857e3ea00fd1", "3ca29e55be4befa4", "87d14f070cb96869",
    "789e46d79514e280", "71741fe2460a6150", "00a7dc5a0cc38858", "2c77714df232b07f",
    "f65219c547f9c032", "c3db8466ffcd8589", "51c6b9f69c48a75b", "03eabd6c5c4ff24d",
    "a05b0cf8b91804c7", "26b9cccfe247fdba", "3530c4415dd857fb", "271dacc9f4d0caf8",
    "0fd460f0568e29c1", "70cca582c4895337", "ea0d3d5c3c27a0ba", "bd048f6f965d0e9c",
    "ae0e9bceb9fb1084", "89389784c68edf23", "29e602b3a4d0cf7c", "e56002408dd4d44e",
    "7fb6addd9ff11610", "3710b66b715bff42", "668fb7edafc1add3", "41f537c02c91f978",
    "45d6a22065de5d4c", "4dcd873c17f1cd98", "bf90d5ca93ecf15b", "d99f6ae28e911cc9",
    "d8b3f7b1f01332e6", "85b03f9a57d95879", "ec40643524044478", "fec09e6fa80d6ff7",
    "c027b42befa553de", "57630988f95417c0",
})  # fmt: skip
# A host named like a mirror or a repository, whichever domain it is in.
MIRROR_LIKE = re.compile(
    r"(mirrors?|deb|apt|archive|ppa|packages|pkgs?|repos?|registry|downloads?|ftp|snapshot|ports)"
    r"\d*\."
)
# Names in a domain that serves nothing (RFC 2606 and 6761), and hosts that serve no packages.
RESERVED = re.compile(
    r"(^|\.)(example\.(com|org|net)|[a-z0-9-]+\.(invalid|example|test|localhost))$"
)
NOT_PACKAGE_HOSTS = {"github.com", "localhost"}
# The top-level domains a host name is looked for in (file names such as archive.tar.gz are not).
TLDS = (
    "com|org|net|io|dev|edu|gov|info|co|uk|de|fr|nl|eu|jp|cn|ru|ca|au|br|in|ch|se|no|fi|it|es|pl"
    "|cz|at|be|dk"
)
HOST = re.compile(rf"(?<![\w.@-])((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:{TLDS}))(?![\w-])")
URL = re.compile(r"\b(?:https?|ftp)://([^/\s\"'<>()\[\]`:]+)")
# Where a URL with a literal host is a package source written in the tree.
INFRASTRUCTURE = (
    *("lab/", "molecule/", "collections/", "scripts/", "docs/", "inventory/", "playbooks/"),
    *(".config/", ".ci/", "Makefile", "README.md", "site.yml"),
)


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def _tree() -> dict[str, str]:
    """Every text file of the tree, tracked or new (not ignored), by its path."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    texts = {}
    for name in filter(None, listed):
        path = ROOT / name
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        texts[name] = data.decode("utf-8", "replace")
    return texts


def package_hosts(text: str) -> list[str]:
    """The host names in `text` that are public package hosts or named like mirrors."""
    found = []
    for match in HOST.finditer(text.lower()):
        host = match[1]
        if RESERVED.search(host) or host in NOT_PACKAGE_HOSTS:
            continue
        labels = host.split(".")
        suffixes = {".".join(labels[i:]) for i in range(len(labels) - 1)}
        if {_digest(s) for s in suffixes} & PACKAGE_HOSTS or MIRROR_LIKE.match(host):
            found.append(host)
    return found


def url_hosts(text: str) -> list[str]:
    """The literal hosts of the URLs in `text`, but placeholders (HOST, {{ host }}, ${HOST}),
    reserved names and NOT_PACKAGE_HOSTS."""
    found = []
    for match in URL.finditer(text):
        host = match[1]
        if re.search(r"[A-Z{}$%<]", host) or not re.search(r"[a-z]", host):
            continue  # a placeholder or a template, or an address
        if RESERVED.search(host) or host in NOT_PACKAGE_HOSTS:
            continue
        found.append(host)
    return found


def test_no_package_host_is_named_in_the_tree() -> None:
    found = [
        f"{name}:{text.count(chr(10), 0, text.lower().find(host)) + 1}: {host}"
        for name, text in _tree().items()
        for host in sorted(set(package_hosts(text)))
    ]
    assert found == [], "package hosts in the tree (take sources from apt or a variable):\n" + (
        "\n".join(found)
    )


def test_no_url_in_the_lab_roles_or_docs_has_a_literal_host_beyond_the_allowed() -> None:
    found = [
        f"{name}: {host}"
        for name, text in _tree().items()
        if name.startswith(INFRASTRUCTURE)
        for host in sorted(set(url_hosts(text)))
    ]
    assert found == [], "\n".join(found)


def test_the_checks_find_what_they_look_for() -> None:
    """Each check on made-up text: a mirror's shape, a parent domain's digest, a URL's host."""
    mirror = ".".join(["mirrors", "campus", "edu"])  # joined here: this file names no mirror
    assert package_hosts(f"deb http://{mirror}/debian bookworm main") == [mirror]
    assert package_hosts("see archive.tar.gz, ansible.builtin.apt and gpulab.invalid") == []
    assert package_hosts("URIs: http://mirror.example.org/debian") == []  # reserved for examples
    assert _digest("github.com") not in PACKAGE_HOSTS
    assert (
        url_hosts("url: http://{{ host }}:9090 or http://CONTROLLER:9090 or http://10.0.0.1/") == []
    )
    assert url_hosts("URIs: https://cache.site.lan.org/debian") == ["cache.site.lan.org"]
