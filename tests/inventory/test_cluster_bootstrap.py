"""docs/cluster_bootstrap.md walks a real cluster from bare hosts with a control machine that
has only Ansible: no step of the development lab, and every playbook, role, plugin and variable
it names exists (a renamed variable fails here, not in a reader's first converge)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs/cluster_bootstrap.md"
README = ROOT / "README.md"
COLLECTION = ROOT / "collections/ansible_collections/gpulab/cluster"
EXAMPLE = ROOT / "inventory/example"
# What belongs to the development lab and its set-up, not to a control machine.
LAB_STEPS = re.compile(r"podman|make lab|setup\.sh|molecule|inventory/lab|\.venv|qemu|binfmt")
# A variable as the text shows it: alone or as `name: value` in backticks, a key in a YAML block.
IDENTIFIER = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
IN_BACKTICKS = re.compile(rf"`({IDENTIFIER})(?::[^`]*)?`")
YAML_KEY = re.compile(rf"^\s*-?\s*({IDENTIFIER}):", re.MULTILINE)
FQCN = re.compile(r"\bgpulab\.cluster\.(\w+)")


def _text() -> str:
    assert DOC.is_file(), "docs/cluster_bootstrap.md is missing"
    return DOC.read_text()


def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)


def _named_variables(text: str) -> set[str]:
    names = set(IN_BACKTICKS.findall(text))
    for block in _yaml_blocks(text):
        names |= set(YAML_KEY.findall(block))
    return names


def _collection_thing_exists(name: str) -> bool:
    return (
        (COLLECTION / "playbooks" / f"{name}.yml").is_file()
        or (COLLECTION / "roles" / name).is_dir()
        or any(COLLECTION.glob(f"plugins/*/{name}.py"))
        or (COLLECTION / "plugins/filter" / f"{name}.yml").is_file()
    )


def _declared_variables() -> set[str]:
    """Every role's argument spec options, the collection's playbooks' play vars, and the
    example inventory's own `site_` values and the vault's `vault_` names."""
    names: set[str] = set()
    for spec in COLLECTION.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec.read_text())["argument_specs"].values():
            names.update(entry.get("options", {}))
    for playbook in COLLECTION.glob("playbooks/*.yml"):
        for play in yaml.safe_load(playbook.read_text()) or []:
            names.update(play.get("vars", {}) or {})
    for path in EXAMPLE.rglob("*.yml"):
        names.update(re.findall(r"\b((?:site|vault)_\w+)", path.read_text()))
    return names


def test_the_walk_through_has_no_lab_step() -> None:
    lines = [line for line in _text().splitlines() if LAB_STEPS.search(line)]
    assert lines == []


def test_every_playbook_run_is_one_of_the_collection() -> None:
    """The control machine has the collection, not necessarily a checkout: every
    ansible-playbook names a playbook of the collection, which exists."""
    runs = [line for line in _text().splitlines() if re.match(r"\s*ansible-playbook\b", line)]
    assert runs, "the walk-through runs no playbook"
    for line in runs:
        names = FQCN.findall(line)
        assert names, f"not a playbook of the collection: {line.strip()}"
        for name in names:
            assert (COLLECTION / "playbooks" / f"{name}.yml").is_file(), line
    named = set(" ".join(runs).split())
    assert {"gpulab.cluster.site", "gpulab.cluster.validate"} <= named


def test_every_collection_name_exists() -> None:
    missing = sorted(n for n in set(FQCN.findall(_text())) if not _collection_thing_exists(n))
    assert missing == [], f"gpulab.cluster.{missing} named but not in the collection"


def test_every_variable_named_is_declared() -> None:
    text = _text()
    prefixes = {p.name for p in (COLLECTION / "roles").iterdir()}
    prefixes |= set(FQCN.findall(text)) | {"validate", "site", "vault", "node_check"}
    named = {n for n in _named_variables(text) if any(n.startswith(f"{p}_") for p in prefixes)}
    assert len(named) > 20, sorted(named)  # the walk-through names the variables it uses
    assert sorted(named - _declared_variables()) == []


def test_the_walk_through_covers_the_three_machines_and_the_control_machine() -> None:
    text = _text()
    headings = re.findall(r"^#+ (.*)$", text, re.MULTILINE)
    assert any("control machine" in h for h in headings), headings
    for host in ("rpi5", "orin1", "gpu1"):
        assert any(f"`{host}`" in h for h in headings), (host, headings)
    for step in ("ansible-galaxy collection install", "requirements.yml", "ansible-vault",
                 "gpulab.cluster.validate", "lab-report.md", "mokutil", "docs/operations.md",
                 "docs/troubleshooting.md"):  # fmt: skip
        assert step in text, step


def test_the_readme_sends_a_real_cluster_to_the_walk_through() -> None:
    """The README's real cluster needs no lab: scripts/setup.sh is the lab's set-up only."""
    text = README.read_text()
    section = text[text.index("## A real cluster") :].split("\n## ")[0]
    assert "[docs/cluster_bootstrap.md](docs/cluster_bootstrap.md)" in section
    assert not LAB_STEPS.search(section.split("To check one GPU node")[0])
    assert "gpulab.cluster.site" in section and "gpulab.cluster.validate" in section
    setup = [p for p in text.split("\n\n") if "setup.sh" in p]
    assert setup and all("lab" in p and "control machine" in p for p in setup), setup
