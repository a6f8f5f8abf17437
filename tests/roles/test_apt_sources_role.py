"""gpulab.cluster.apt_sources for real, on this machine, against three local repositories that apt
then reads: a flat one taken unsigned, one signed by a key written into the source file, and a
mirror-shaped one (dists/SUITE/main) signed by a keyring file. No network, nothing of this
machine's apt changes.

Stand-in, named: apt's directories are a temporary root. The role's private paths
(vars/main.yml) are set as host facts by a play of their own (set_fact ranks above a role's
vars; play vars do not), and apt itself (apt-get, and the apt module's package list update)
reads APT_CONFIG, which points every Dir:: there. This machine's /etc/apt is compared before
and after.

One ansible-playbook run, four plays: exclusive sources and a proxy, the same again (nothing
changes and apt's lists are not updated), the defaults (the role's files go, the host's set
aside come back), the defaults again (nothing changes).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.roles.playbook import run_playbook

ROLE = "gpulab.cluster.apt_sources : "  # how the report names the role's tasks
SYSTEM_PYTHON = "/usr/bin/python3"  # the apt module needs python3-apt, which the venv lacks
MISSING = [tool for tool in ("apt-get", "apt-cache", "dpkg-deb", "gpg") if not shutil.which(tool)]
pytestmark = pytest.mark.skipif(
    bool(MISSING) or subprocess.run([SYSTEM_PYTHON, "-c", "import apt_pkg"], check=False,
                                    capture_output=True).returncode != 0,
    reason=f"needs apt, dpkg-deb, gpg and {SYSTEM_PYTHON} with python3-apt (missing: {MISSING})",
)  # fmt: skip


def _run(*argv: str | Path, **kwargs: Any) -> str:
    done = subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True,
                          **kwargs)  # fmt: skip
    return done.stdout


def _deb(work: Path, name: str) -> Path:
    """A package of nothing but its control file."""
    root = work / "build" / name
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: gpulab <t@gpulab.invalid>\n"
        f"Description: {name}\n"
    )
    deb = work / "build" / f"{name}_1.0_all.deb"
    _run("dpkg-deb", "--root-owner-group", "--build", root, deb)
    return deb


def _packages(debs: list[Path], pool: str) -> str:
    """A Packages index of `debs`, each at pool/NAME (what dpkg-scanpackages writes)."""
    entries = []
    for deb in debs:
        control = _run("dpkg-deb", "--field", deb).strip()
        data = deb.read_bytes()
        entries.append(f"{control}\nFilename: {pool}{deb.name}\nSize: {len(data)}\n"
                       f"SHA256: {hashlib.sha256(data).hexdigest()}\n")  # fmt: skip
    return "\n".join(entries)


def _release(directory: Path, suite: str, files: list[str]) -> None:
    hashes = "".join(
        f" {hashlib.sha256((directory / f).read_bytes()).hexdigest()} "
        f"{(directory / f).stat().st_size} {f}\n"
        for f in files
    )
    (directory / "Release").write_text(
        f"Origin: gpulab-test\nSuite: {suite}\nCodename: {suite}\nDate: {formatdate(usegmt=True)}\n"
        f"Architectures: amd64 arm64 all\nComponents: main\nSHA256:\n{hashes}"
    )


@pytest.fixture(scope="module")
def gnupg() -> Iterator[tuple[Path, str]]:
    """A signing key in a GnuPG home of a short path (its agent's socket must fit), and the
    key's ID; the agent is stopped at the end."""
    home = Path(tempfile.mkdtemp(prefix="gpulab-gpg-", dir="/tmp"))
    home.chmod(0o700)
    gpg = [
        "gpg",
        "--batch",
        "--homedir",
        str(home),
        "--passphrase",
        "",
        "--pinentry-mode",
        "loopback",
    ]
    _run(*gpg, "--quick-gen-key", "gpulab test <test@gpulab.invalid>", "ed25519", "sign", "never")
    fingerprint = _run(*gpg, "--list-keys", "--with-colons").split("fpr:::::::::")[1].split(":")[0]
    yield home, fingerprint
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, gnupg: tuple[Path, str]) -> dict[str, Any]:
    """The three repositories, the keys, and an apt root holding this host's own source."""
    work = tmp_path_factory.mktemp("apt")
    home, fingerprint = gnupg
    gpg = ["gpg", "--batch", "--homedir", str(home), "--local-user", fingerprint]
    # A flat repository, unsigned: what a site makes from .deb files it carries in.
    flat = work / "flat"
    flat.mkdir()
    shutil.copy(_deb(work, "gpulab-probe-flat"), flat)
    (flat / "Packages").write_text(_packages(sorted(flat.glob("*.deb")), "./"))
    # A flat repository signed by the key the source file itself carries.
    signed = work / "signed"
    signed.mkdir()
    shutil.copy(_deb(work, "gpulab-probe-signed"), signed)
    (signed / "Packages").write_text(_packages(sorted(signed.glob("*.deb")), "./"))
    _release(signed, "./", ["Packages"])
    _run(*gpg, "--clearsign", "--output", signed / "InRelease", signed / "Release")
    # A mirror's layout, signed, its key in a keyring file.
    mirror = work / "mirror"
    binary = mirror / "dists/gpulab-test/main/binary-amd64"
    (mirror / "pool").mkdir(parents=True)
    binary.mkdir(parents=True)
    shutil.copy(_deb(work, "gpulab-probe-mirror"), mirror / "pool")
    index = _packages(sorted((mirror / "pool").glob("*.deb")), "pool/")
    (binary / "Packages").write_text(index)
    (binary / "Packages.gz").write_bytes(gzip.compress(index.encode()))
    _release(mirror / "dists/gpulab-test", "gpulab-test",
             ["main/binary-amd64/Packages", "main/binary-amd64/Packages.gz"])  # fmt: skip
    dists = mirror / "dists/gpulab-test"
    _run(*gpg, "--clearsign", "--output", dists / "InRelease", dists / "Release")
    keyring = work / "site-archive.gpg"
    keyring.write_bytes(subprocess.run(["gpg", "--homedir", str(home), "--export", fingerprint],
                                       check=True, capture_output=True).stdout)  # fmt: skip
    armored = _run("gpg", "--homedir", home, "--armor", "--export", fingerprint)
    # The host's own sources: a flat repository apt finds only while they are not set aside.
    host = work / "host"
    host.mkdir()
    shutil.copy(_deb(work, "gpulab-probe-host"), host)
    (host / "Packages").write_text(_packages(sorted(host.glob("*.deb")), "./"))
    # apt's root.
    apt = work / "root"
    for directory in ("etc/apt/sources.list.d", "etc/apt/apt.conf.d", "etc/apt/preferences.d",
                      "var/lib/apt/lists/partial",
                      "var/cache/apt/archives/partial", "var/lib/dpkg", "log"):  # fmt: skip
        (apt / directory).mkdir(parents=True)
    (apt / "var/lib/dpkg/status").write_text("")
    (apt / "etc/apt/sources.list").write_text("# this host's sources are in sources.list.d\n")
    (apt / "etc/apt/sources.list.d/debian.sources").write_text(_host_sources(host))
    (work / "apt.conf").write_text(
        f'Dir::Etc "{apt}/etc/apt/";\nDir::State "{apt}/var/lib/apt/";\n'
        f'Dir::State::status "{apt}/var/lib/dpkg/status";\nDir::Cache "{apt}/var/cache/apt/";\n'
        f'Dir::Log "{apt}/log/";\nAPT::Sandbox::User "root";\nAPT::Architecture "amd64";\n'
        'Acquire::Languages "none";\n'
    )
    return {"work": work, "flat": flat, "signed": signed, "mirror": mirror, "keyring": keyring,
            "armored": armored, "apt": apt, "apt_conf": work / "apt.conf"}  # fmt: skip


def _host_sources(host: Path) -> str:
    return f"Types: deb\nURIs: file:{host}\nSuites: ./\nTrusted: yes\n"


def _repositories(site: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": "site-local", "uris": [f"file:{site['flat']}"], "suites": ["./"], "trusted": True},
        {"name": "site-signed", "uris": f"file:{site['signed']}", "suites": "./",
         "signed_by": site["armored"]},
        {"name": "site-mirror", "uris": [f"file:{site['mirror']}"], "suites": ["gpulab-test"],
         "components": ["main"], "architectures": ["amd64"], "signed_by": str(site["keyring"])},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def converged(site: dict[str, Any]) -> dict[str, Any]:
    """The four plays' task results, the files after the first two plays, and apt's view then."""
    work: Path = site["work"]
    apt: Path = site["apt"]
    # Host facts (set_fact): above the role's vars/main.yml, which play vars are below.
    paths = {"_apt_sources_list": f"{apt}/etc/apt/sources.list",
             "_apt_sources_parts": f"{apt}/etc/apt/sources.list.d",
             "_apt_sources_proxy_file": f"{apt}/etc/apt/apt.conf.d/80gpulab-proxy"}  # fmt: skip
    exclusive = {"apt_sources_repositories": _repositories(site), "apt_sources_exclusive": True,
                 "apt_sources_proxy": "http://proxy.example.invalid:3142"}  # fmt: skip
    files = (
        "import json, pathlib, sys; print(json.dumps({str(p): p.read_text() for p in "
        "sorted(pathlib.Path(sys.argv[1]).rglob('*')) if p.is_file()}))"
    )
    snapshot = {"name": "Note what the first plays left", "hosts": "all", "gather_facts": False,
                "tasks": [
                    {"name": "Note apt's view", "changed_when": False, "ansible.builtin.command": {
                        "argv": ["apt-cache", "policy", "gpulab-probe-flat", "gpulab-probe-signed",
                                 "gpulab-probe-mirror", "gpulab-probe-host"]}},
                    {"name": "Note apt's proxy", "changed_when": False, "ansible.builtin.command": {
                        "argv": ["apt-config", "shell", "H", "Acquire::http::Proxy",
                                 "S", "Acquire::https::Proxy"]}},
                    {"name": "Note apt's files", "changed_when": False, "ansible.builtin.command": {
                        "argv": [SYSTEM_PYTHON, "-c", files, f"{apt}/etc/apt"]}}]}  # fmt: skip
    stand_in = {
        "name": "Stand-in: apt's directories in a temporary root",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [{"name": "Stand-in: the paths", "ansible.builtin.set_fact": paths}],
    }
    plays = [stand_in] + [
        {"name": f"apt_sources {n}", "hosts": "all", "gather_facts": True,
         "vars": variables, "roles": [{"role": "gpulab.cluster.apt_sources"}]}
        for n, variables in (("exclusive", exclusive), ("exclusive again", exclusive))
    ] + [snapshot] + [
        {"name": f"apt_sources {n}", "hosts": "all", "gather_facts": False,
         "roles": [{"role": "gpulab.cluster.apt_sources"}]}
        for n in ("defaults", "defaults again")
    ]  # fmt: skip
    (work / "hosts.json").write_text(
        json.dumps(
            {
                "all": {
                    "hosts": {
                        "node1": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": SYSTEM_PYTHON,
                        }
                    }
                }
            }
        )
    )
    (work / "play.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    before = _files(Path("/"))
    report = run_playbook(work, APT_CONFIG=str(site["apt_conf"]))
    assert _files(Path("/")) == before, "this machine's own apt files changed"
    results = [
        {t["task"]["name"]: t["hosts"]["node1"] for t in play["tasks"] if "node1" in t["hosts"]}
        for play in report["plays"][1:]
    ]
    return {"plays": results, "after": _files(apt)}


def _files(root: Path) -> dict[str, str]:
    """Each file under root's etc/apt and the digest of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "etc/apt").rglob("*")) if p.is_file()}  # fmt: skip


def _lists_updated(play: dict[str, dict[str, Any]]) -> bool:
    """Whether the role's handler ran and updated apt's package lists. (The apt module's own
    cache_updated reads the mtime of this machine's /var/lib/apt, not APT_CONFIG's: here it
    cannot tell; apt's view after the update, test_exclusive_sources..., can.)"""
    result = play.get(ROLE + "Update apt's package lists")
    return result is not None and not result.get("failed") and not result.get("skipped")


def _changed(play: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name, result in play.items() if result.get("changed")]


def test_exclusive_sources_are_the_only_ones_apt_reads(
    converged: dict[str, Any], site: dict[str, Any]
) -> None:
    first, _, snapshot, _, _ = converged["plays"]
    found = first[ROLE + "Find apt's source files"]["invocation"]["module_args"]["paths"]
    assert all(path.startswith(str(site["apt"])) for path in found), found
    assert _lists_updated(first)
    policy = snapshot["Note apt's view"]["stdout"]
    for name, repository in (("flat", site["flat"]), ("signed", site["signed"]),
                             ("mirror", site["mirror"])):  # fmt: skip
        section = policy.split(f"gpulab-probe-{name}:")[1].split("gpulab-probe-")[0]
        assert "Candidate: 1.0" in section and f"file:{repository}" in section, policy
    # The host's own sources are set aside: apt does not know their package.
    assert "gpulab-probe-host" not in policy, policy


def test_the_files_as_written_and_taken_away(
    site: dict[str, Any], converged: dict[str, Any]
) -> None:
    parts = f"{site['apt']}/etc/apt/sources.list.d"
    written = json.loads(converged["plays"][2]["Note apt's files"]["stdout"])
    header = (
        "# Written by gpulab.cluster.apt_sources (apt_sources_repositories: {}): changes here are"
        " overwritten.\n"
    )
    assert written[f"{parts}/site-local.gpulab.sources"] == header.format("site-local") + (
        f"Types: deb\nURIs: file:{site['flat']}\nSuites: ./\nTrusted: yes\n"
    )
    assert written[f"{parts}/site-mirror.gpulab.sources"] == header.format("site-mirror") + (
        f"Types: deb\nURIs: file:{site['mirror']}\nSuites: gpulab-test\nComponents: main\n"
        f"Architectures: amd64\nSigned-By: {site['keyring']}\n"
    )
    key_lines = "".join(f" {line or '.'}\n" for line in site["armored"].strip().splitlines())
    assert written[f"{parts}/site-signed.gpulab.sources"] == header.format("site-signed") + (
        f"Types: deb\nURIs: file:{site['signed']}\nSuites: ./\nSigned-By:\n{key_lines}"
    )
    assert f"{parts}/debian.sources.gpulab.disabled" in written
    # The defaults took every file of the role away.
    assert not [name for name in converged["after"] if "gpulab" in name], converged["after"]


def test_the_hosts_sources_are_set_aside_and_come_back(
    site: dict[str, Any], converged: dict[str, Any]
) -> None:
    first, again, _, defaults, defaults_again = converged["plays"]
    moved = first[ROLE + "Set the host's other sources aside (apt_sources_exclusive)"]
    assert sorted(Path(r["item"]).name for r in moved["results"] if r["changed"]) == [
        "debian.sources", "sources.list"]  # fmt: skip
    restored = defaults[ROLE + "Put the sources set aside back"]
    assert sorted(Path(r["item"]).name for r in restored["results"] if r["changed"]) == [
        "debian.sources.gpulab.disabled", "sources.list.gpulab.disabled"]  # fmt: skip
    apt = site["apt"]
    assert (apt / "etc/apt/sources.list.d/debian.sources").read_text() == _host_sources(
        site["work"] / "host"
    )
    assert _lists_updated(defaults)
    # The same settings twice: nothing changes, apt's lists are not fetched again.
    assert _changed(again) == [] and _changed(defaults_again) == []
    assert not _lists_updated(again) and not _lists_updated(defaults_again)


def test_the_proxy_as_apt_reads_it(converged: dict[str, Any]) -> None:
    _, _, snapshot, defaults, _ = converged["plays"]
    assert snapshot["Note apt's proxy"]["stdout"].strip() == "H='http://proxy.example.invalid:3142'"
    assert defaults[ROLE + "Remove the proxy the role wrote"]["changed"]
