"""gpulab.cluster installed the Ansible way, for real: from git (this repository's committed
state, as `git+file://`) and from the tarball `ansible-galaxy collection build` makes, each into
a temporary collections path that Ansible then uses alone. And galaxy.yml's dependencies are the
collections the roles, playbooks and plugins name, which requirements.yml installs; its licence and
links are what the installed collection says, each filter has its own documentation, and its
version is its latest release, named wherever the tarball is."""

from __future__ import annotations

import importlib
import itertools
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.release import __version__ as ANSIBLE_CORE_VERSION
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "collections/ansible_collections/gpulab/cluster"
BIN = Path(sys.executable).parent
ROLES = sorted(path.name for path in (COLLECTION / "roles").iterdir())
# site imports the component playbooks, which import facts (and vulkan_devices) first.
COMPONENTS = (
    *("apt_sources", "identity", "timesync", "munge", "storage", "vulkan", "slurm", "payload"),
)
PLAYBOOKS = (
    "site",
    "validate",
    "node_check",
    "facts",
    "vulkan_devices",
    *COMPONENTS,
    "monitoring",
    "upgrade",
)
# A collection name inside a module key, a filter, a test or a lookup: `ns.coll.name`.
FQCN = re.compile(r"(?<![\w.])([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*")
IMPORT = re.compile(r"ansible_collections\.([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)")
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
# Collections that every ansible-core has, and this one.
NOT_DEPENDENCIES = {"ansible.builtin", "ansible.legacy", "gpulab.cluster"}


def _galaxy() -> dict[str, Any]:
    galaxy: dict[str, Any] = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())
    return galaxy


def _yaml_files() -> Iterator[Path]:
    for folder in ("roles", "playbooks"):
        yield from sorted((COLLECTION / folder).rglob("*.yml"))


def _strings_and_keys(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings_and_keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings_and_keys(item)
    elif isinstance(node, str):
        yield from JINJA.findall(node)


def _collections_named() -> dict[str, set[str]]:
    """Each collection the content names, with the files that name it."""
    named: dict[str, set[str]] = {}
    for path in _yaml_files():
        for text in _strings_and_keys(yaml.safe_load(path.read_text())):
            for match in FQCN.finditer(text):
                named.setdefault(".".join(match.groups()), set()).add(str(path.relative_to(REPO)))
    for path in sorted((COLLECTION / "plugins").rglob("*.py")):
        for match in IMPORT.finditer(path.read_text()):
            named.setdefault(".".join(match.groups()), set()).add(str(path.relative_to(REPO)))
    return named


def test_galaxy_dependencies_are_the_collections_the_content_names() -> None:
    named = _collections_named()
    assert {"ansible.builtin", "gpulab.cluster"} <= set(named), "the scan finds nothing"
    used = {
        name: files
        for name, files in named.items()
        # Registered results and facts read like FQCNs (`__slurm_installed.stdout`): only
        # names of installed collections count.
        if name not in NOT_DEPENDENCIES and _is_a_collection(name)
    }
    assert set(_galaxy()["dependencies"]) == set(used), used


def _is_a_collection(name: str) -> bool:
    namespace, collection = name.split(".")
    import ansible_collections  # noqa: PLC0415 - the collections the ansible package bundles

    return any(
        (Path(root) / namespace / collection / "MANIFEST.json").is_file()
        or (Path(root) / namespace / collection / "galaxy.yml").is_file()
        for root in [*ansible_collections.__path__, str(REPO / "collections/ansible_collections")]
    )


def test_requirements_yml_installs_the_galaxy_dependencies() -> None:
    requirements = yaml.safe_load((REPO / "requirements.yml").read_text())
    listed = {entry["name"]: entry["version"] for entry in requirements["collections"]}
    assert listed == _galaxy()["dependencies"]


def _env(collections_path: Path) -> dict[str, str]:
    # An empty ansible.cfg: nothing of this repository's (roles_path, collections_path) is used.
    config = collections_path / "ansible.cfg"
    config.write_text("[defaults]\n")
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "ANSIBLE_CONFIG": str(config),
        "ANSIBLE_COLLECTIONS_PATH": str(collections_path),
        "ANSIBLE_NOCOLOR": "1",
    }


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
    return done.stdout


def _install_from_git(target: Path) -> None:
    commit = _run(["git", "rev-parse", "HEAD"], dict(os.environ), REPO).strip()
    source = f"git+file://{REPO}#collections/ansible_collections/gpulab/cluster,{commit}"
    _run([str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(target),
          source], _env(target), target)  # fmt: skip


def _install_from_tarball(target: Path) -> None:
    env = _env(target) | {"GPULAB_COLLECTION_OUT": str(target / "dist")}
    _run(["bash", str(REPO / "scripts/build-collection.sh")], env, REPO)
    (tarball,) = (target / "dist").glob("gpulab-cluster-*.tar.gz")
    _run([str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(target),
          str(tarball)], env, target)  # fmt: skip


@pytest.fixture(scope="module", params=["git", "tarball"])
def installed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A collections path holding gpulab.cluster installed from git or from the tarball."""
    target = tmp_path_factory.mktemp(f"collections-{request.param}")
    {"git": _install_from_git, "tarball": _install_from_tarball}[request.param](target)
    return target


def test_the_installed_collection_has_every_role_plugin_and_playbook(installed: Path) -> None:
    tree = installed / "ansible_collections/gpulab/cluster"
    assert sorted(path.name for path in (tree / "roles").iterdir()) == ROLES
    for role in ROLES:
        assert (tree / "roles" / role / "meta/argument_specs.yml").is_file()
        assert (tree / "roles" / role / "README.md").is_file()
    for kind in ("modules", "module_utils", "filter"):
        shipped = {path.name for path in (tree / "plugins" / kind).glob("*.py")}
        assert shipped == {path.name for path in (COLLECTION / "plugins" / kind).glob("*.py")}
    for name in ("slurm_client.py", "nvidia_driver.py", "gpu_files.py", "slurm_gpu_env.py"):
        assert (tree / "plugins/module_utils" / name).read_bytes() == (
            COLLECTION / "plugins/module_utils" / name
        ).read_bytes()
    assert not list(tree.rglob("__pycache__"))


def test_the_tarball_carries_the_payload_sdist(installed: Path) -> None:
    """The payload role builds the workers' wheels from it wherever the tarball is installed: the
    native sources with the aarch64 toolchain file, the shared Slurm client and the example
    graphs. A git install has none (git ignores the built file): its users name a source
    (roles/payload/README.md), as the role's first check tells them."""
    sdist = installed / "ansible_collections/gpulab/cluster/roles/payload/files/gpulab.tar.gz"
    if installed.name.startswith("collections-git"):
        assert not sdist.exists()
        return
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        top = {name.split("/", 1)[0] for name in archive.getnames()}
        links = [member.name for member in archive.getmembers() if member.issym()]
    assert len(top) == 1  # gpulab-VERSION/
    assert links == []  # the shared modules (links in the tree) are in it as files
    assert {
        "pyproject.toml",
        "setup.py",
        "PKG-INFO",
        "native/CMakeLists.txt",
        "native/cmake/aarch64-linux-gnu.cmake",
        "src/gpulab/submit/slurm_client.py",
        "src/gpulab/placement/nvidia_driver.py",
        "src/gpulab/placement/gpu_files.py",
        "src/gpulab/placement/slurm_gpu_env.py",
        "src/gpulab/examples/saxpy_norm.json",
    } <= names
    assert [n for n in names if "/_lib/" in n or n.endswith((".so", ".o"))] == []


def test_the_installed_playbooks_load_with_every_role(installed: Path) -> None:
    inventory = installed / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n"
        + "".join(f"    {group}:\n      hosts:\n        node1:\n"
                  for group in ("controller", "storage", "workers"))
    )  # fmt: skip
    listed = _run(
        [str(BIN / "ansible-playbook"), "--list-tasks", "-i", str(inventory),
         *(f"gpulab.cluster.{name}" for name in PLAYBOOKS)],
        _env(installed), installed,
    )  # fmt: skip
    for role in ROLES:
        assert f"gpulab.cluster.{role} : " in listed, role


def test_the_installed_module_runs_with_its_module_utils(installed: Path) -> None:
    # Check mode runs no Slurm command: sbatch only has to be found on PATH.
    (installed / "bin").mkdir(exist_ok=True)
    (installed / "bin/sbatch").write_text("#!/bin/sh\nexit 1\n")
    (installed / "bin/sbatch").chmod(0o755)
    env = _env(installed)
    env["PATH"] = f"{installed / 'bin'}{os.pathsep}{env['PATH']}"
    out = _run(
        [str(BIN / "ansible"), "localhost", "--check", "-o", "-m", "gpulab.cluster.slurm_job",
         "-a", "command=true gres=gpu:1"],
        env, installed,
    )  # fmt: skip
    assert "--gres=gpu:1" in out
    out = _run(
        [str(BIN / "ansible"), "localhost", "-o", "-m", "ansible.builtin.debug",
         "-a", "msg={{ 'slurm-wlm 22.05.8-4' | gpulab.cluster.slurm_release }}"],
        env, installed,
    )  # fmt: skip
    assert '"msg": "22.05"' in out


def test_the_facts_modules_first_name_runs_it_where_installed(installed: Path) -> None:
    """gpulab.cluster.vulkan_info, redirected by the installed meta/runtime.yml to
    vulkan_facts, on a recorded vulkaninfo (lavapipe's)."""
    fixtures = REPO / "tests/collection/fixtures"
    vulkaninfo = installed / "vulkaninfo"
    vulkaninfo.write_text(
        f'#!/bin/sh\nif [ "$1" = --summary ]; then cat {fixtures}/vulkaninfo-summary-lavapipe.txt;'
        f" else cat {fixtures}/vulkaninfo-lavapipe.txt; fi\n"
    )
    vulkaninfo.chmod(0o755)
    out = _run(
        [str(BIN / "ansible"), "localhost", "-o", "-m", "gpulab.cluster.vulkan_info",
         "-e", f"ansible_python_interpreter={sys.executable}",
         "-a", f"vulkaninfo={vulkaninfo} dev_dir={installed}"],
        _env(installed), installed,
    )  # fmt: skip
    result = json.loads(out.partition(" => ")[2])
    assert result["changed"] is False
    [device] = result["ansible_facts"]["gpulab_vulkan_devices"]
    assert device["driver"] == "llvmpipe"


def _filters() -> set[str]:
    names: set[str] = set()
    for path in (COLLECTION / "plugins/filter").glob("*.py"):
        module = importlib.import_module(
            f"ansible_collections.gpulab.cluster.plugins.filter.{path.stem}"
        )
        names |= set(module.FilterModule().filters())
    return names


def test_the_collection_readme_lists_every_role_plugin_and_playbook() -> None:
    """... and every name meta/runtime.yml routes to another (a module's first name)."""
    readme = (COLLECTION / "README.md").read_text()
    listed = set(re.findall(r"`gpulab\.cluster\.([a-z_]+)`", readme))
    modules = {path.stem for path in (COLLECTION / "plugins/modules").glob("*.py")}
    callbacks = {path.stem for path in (COLLECTION / "plugins/callback").glob("*.py")}
    lookups = {path.stem for path in (COLLECTION / "plugins/lookup").glob("*.py")}
    playbooks = {path.stem for path in (COLLECTION / "playbooks").glob("*.yml")}
    routing = yaml.safe_load((COLLECTION / "meta/runtime.yml").read_text())["plugin_routing"]
    routed = {name for names in routing.values() for name in names}
    assert set(PLAYBOOKS) == playbooks
    assert listed == set(ROLES) | modules | callbacks | lookups | _filters() | playbooks | routed


def test_each_filter_shows_its_own_documentation(installed: Path) -> None:
    """A plugin file of several filters has one DOCUMENTATION, which ansible-doc showed for each
    of them: each filter's documentation names it, describes it alone and gives its examples."""
    names = sorted(_filters())
    out = _run(
        [str(BIN / "ansible-doc"), "--json", "-t", "filter",
         *(f"gpulab.cluster.{name}" for name in names)],
        _env(installed), installed,
    )  # fmt: skip
    docs = json.loads(out)
    assert sorted(docs) == [f"gpulab.cluster.{name}" for name in names]
    for name in names:
        entry = docs[f"gpulab.cluster.{name}"]
        assert entry["doc"]["name"] == name
        assert f"gpulab.cluster.{name}" in entry["examples"], name
        assert entry["return"]["_value"]["description"], name
    descriptions = [docs[f"gpulab.cluster.{name}"]["doc"]["short_description"] for name in names]
    assert len(set(descriptions)) == len(names), descriptions


# The one form of the project's address in the tree (galaxy.yml's repository, the docs' links).
PROJECT_URL = "https://github.com/gpulab/gpulab"
LINKS = ("repository", "documentation", "homepage", "issues")
# A built collection's file name, as READMEs, docs and tests name it.
TARBALL = re.compile(r"gpulab-cluster-(\d[\w.+-]*?)\.tar\.gz")


def test_galaxy_yml_names_the_licence_file_and_the_project_links() -> None:
    galaxy = _galaxy()
    # galaxy.yml takes license (SPDX names) or license_file, never both.
    assert galaxy["license_file"] == "LICENSE"
    assert "license" not in galaxy
    licence = (COLLECTION / "LICENSE").read_bytes()
    assert licence == (REPO / "LICENSE").read_bytes()
    assert licence.startswith(b"MIT License\n")
    for key in LINKS:
        assert galaxy[key] == PROJECT_URL or galaxy[key].startswith(f"{PROJECT_URL}/"), key


def test_the_installed_collection_carries_the_licence_links_and_version(installed: Path) -> None:
    tree = installed / "ansible_collections/gpulab/cluster"
    assert (tree / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()
    info = json.loads((tree / "MANIFEST.json").read_text())["collection_info"]
    galaxy = _galaxy()
    assert info["license_file"] == "LICENSE"
    assert info["version"] == galaxy["version"]
    assert {key: info[key] for key in LINKS} == {key: galaxy[key] for key in LINKS}


def test_requires_ansible_claims_the_ansible_core_the_suite_runs() -> None:
    """The collection and its roles claim the ansible-core release these tests (and ansible-test
    sanity, with its ignore file) run, and none older."""
    release = ".".join(ANSIBLE_CORE_VERSION.split(".")[:2])
    runtime = yaml.safe_load((COLLECTION / "meta/runtime.yml").read_text())
    assert runtime["requires_ansible"] == f">={release}.0"
    for role in ROLES:
        meta = yaml.safe_load((COLLECTION / "roles" / role / "meta/main.yml").read_text())
        assert meta["galaxy_info"]["min_ansible_version"] == release, role
    assert (COLLECTION / f"tests/sanity/ignore-{release}.txt").is_file()


def _releases() -> dict[str, Any]:
    changes = yaml.safe_load((COLLECTION / "changelogs/changelog.yaml").read_text())
    releases: dict[str, Any] = changes["releases"]
    return releases


def test_the_version_is_the_latest_release_and_named_everywhere() -> None:
    version = _galaxy()["version"]
    assert max(_releases(), key=Version) == version
    assert f'<a id="v{version.replace(".", "-")}"></a>' in (COLLECTION / "CHANGELOG.md").read_text()
    tracked = _run(["git", "ls-files", "-z"], dict(os.environ), REPO).split("\0")
    named: dict[str, set[str]] = {}
    for name in tracked:
        path = REPO / name
        if not name or path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 20:
            continue
        for match in TARBALL.finditer(path.read_text(errors="replace")):
            named.setdefault(match.group(1), set()).add(name)
    assert set(named) <= {version}, named


def test_releases_with_breaking_changes_move_the_major_version() -> None:
    releases = _releases()
    ordered = sorted(releases, key=Version)
    for previous, version in itertools.pairwise(ordered):
        changes = releases[version].get("changes", {})
        if changes.get("breaking_changes") or changes.get("removed_features"):
            assert Version(version).major > Version(previous).major, version
