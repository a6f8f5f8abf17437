"""The README stays a user's page: short, the proof first, then the commands, every doc linked."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
COLLECTION = ROOT / "collections/ansible_collections/gpulab/cluster"
LAB_REPORT = COLLECTION / "playbooks/templates/lab-report.md.j2"
# Run-by-run timing and internals live in docs/; the README stays under this.
LIMIT = 12 * 1024


def test_the_readme_is_under_12_kib() -> None:
    size = len(README.read_bytes())
    assert size < LIMIT, f"README.md is {size} bytes; move details into docs/ (limit {LIMIT})"


def test_the_validation_table_comes_before_the_make_lab_command() -> None:
    """The sample is the table `make lab` prints (the report's own header), with real rows."""
    text = README.read_text()
    lines = LAB_REPORT.read_text().splitlines()
    header = next(line for line in lines if line.startswith("| node |"))
    assert header in text
    table = text[text.index(header) :].split("\n\n")[0].splitlines()
    rows = table[2:]
    assert rows, "the validation table has no node rows"
    assert all(re.search(r"\| \d+/\d+ \|", row) for row in rows), rows
    command = re.search(r"^make lab\b", text, re.MULTILINE)
    assert command is not None, "the README no longer shows the `make lab` command"
    assert text.index(header) < command.start()


def test_the_readme_test_command_is_what_ci_runs() -> None:
    text = README.read_text()
    assert re.search(r"^make test\b.*\.ci/run calls exactly this", text, re.MULTILINE)
    assert (ROOT / ".ci/run").read_text().rstrip().endswith("exec make test")


def test_the_readme_links_every_docs_page() -> None:
    text = README.read_text()
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    assert [page for page in pages if page not in text] == []


def test_the_readme_names_the_licence() -> None:
    text = README.read_text()
    assert "MIT" in text and "(LICENSE)" in text
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
