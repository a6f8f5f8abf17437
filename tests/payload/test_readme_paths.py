"""The READMEs and the CLI reference name only files inside the repository, and those exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gpulab.cli.errors import EXIT_MEANINGS

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (
    "README.md",
    "payload/README.md",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
)
TOP_LEVEL = "|".join(sorted(p.name for p in ROOT.iterdir() if not p.name.startswith(".")))
# A repository path as the documents write it: `docs/cli.md`, `roles/*/tasks/validate.yml`.
REPO_PATH = re.compile(rf"(?<![\w/.~-])((?:{TOP_LEVEL})/[\w*./-]*[\w*])")


# Folders the documents tell the reader to make with `cp -r SOURCE DEST`.
_COPIED = {m for d in DOCUMENTS for m in re.findall(r"cp -r \S+ (\S+)", (ROOT / d).read_text())}


@pytest.mark.parametrize("document", DOCUMENTS)
def test_no_path_leaves_the_repository(document: str) -> None:
    text = (ROOT / document).read_text()
    # `$PWD/../..` after a `cd` into the repository stays inside; `../shared/x` does not.
    assert re.findall(r"(?<![\w$/}.])\.\./[\w./-]+", text) == []
    assert re.findall(r"/work/[\w./-]*", text) == []


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_repository_path_named_exists(document: str) -> None:
    base = ROOT if document != "payload/README.md" else ROOT / "payload"
    named = set(REPO_PATH.findall((ROOT / document).read_text()))
    # ROLE, NAME: placeholders; build/: what `make lab` and the scenarios write, made on demand
    # (git ignores it); a site's inventory, which the reader copies from inventory/example
    # (`cp -r inventory/example inventory/mycluster`); a path may also be relative to a folder
    # the text cd's into.
    made = tuple(f"{path}/" for path in _COPIED)
    real = {
        p
        for p in named
        if not re.search(r"/[A-Z]+/", p)
        and not p.startswith("build/")
        and not f"{p}/".startswith(made)
    }
    missing = sorted(p for p in real if not any(base.glob(p)) and not any(ROOT.glob(f"**/{p}")))
    assert missing == []


def test_the_cli_reference_lists_every_exit_code() -> None:
    text = (ROOT / "docs/cli.md").read_text()
    table = text[text.index("## Exit codes") :].split("\n## ")[0]
    assert [int(c) for c in re.findall(r"^\| (\d+) \|", table, re.MULTILINE)] == sorted(
        EXIT_MEANINGS
    )
