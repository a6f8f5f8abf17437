"""`gpulab --help` as a user reads it: every option explained, and at the end the exit codes
and every environment variable the package reads."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from gpulab.cli import errors
from gpulab.cli.epilog import ENVIRONMENT, epilog
from gpulab.cli.main import build_parser

PACKAGE = Path(__file__).resolve().parents[2] / "payload" / "src" / "gpulab"
ENV_NAME = re.compile(r"""["']((?:GPULAB|SLURM|SLURMD|XDG)_[A-Z0-9_]+)["']""")
NOT_ENVIRONMENT = {
    "GPULAB_KERNELS_ABI_VERSION": "a C macro of the native library's header",
    "GPULAB_SUBALLOC_ABI_VERSION": "a C macro of the native library's header",
}
"""Quoted names that look like environment variables but are not read from the environment."""


def parsers(
    parser: argparse.ArgumentParser, path: str = "gpulab"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """The parser and every subcommand's parser, with the command line that reaches it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{path} {name}")


def test_every_option_and_argument_has_help_text() -> None:
    missing = [
        f"{path} {'/'.join(action.option_strings) or action.dest}"
        for path, parser in parsers(build_parser())
        for action in parser._actions
        if not action.help and not isinstance(action, argparse._SubParsersAction)
    ]
    assert missing == []


def test_every_subcommand_has_a_summary() -> None:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {c.dest: c.help for c in commands._choices_actions}
    assert set(summaries) == set(commands.choices)
    assert all(summaries.values())


def test_help_ends_with_every_exit_code_then_the_environment() -> None:
    text = build_parser().format_help()
    codes = {
        value
        for name, value in vars(errors).items()
        if name.startswith("EXIT_") and name.isupper() and isinstance(value, int)
    }
    assert set(errors.EXIT_MEANINGS) == codes
    tail = text[text.index("\nexit codes:\n") :]
    listed = [int(line.split()[0]) for line in tail.splitlines() if re.match(r"  \d+ ", line)]
    assert listed == sorted(codes)
    environment = tail[tail.index("\nenvironment:\n") :]
    for names, _ in ENVIRONMENT:
        assert f"\n  {names}\n" in environment
    assert text.rstrip().endswith(epilog())


def documented() -> set[str]:
    return {name for names, _ in ENVIRONMENT for name in names.split(", ")}


def read_in_source() -> dict[str, str]:
    """Every quoted GPULAB_/SLURM_/SLURMD_/XDG_ name in the package, with a file it is in."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in ENV_NAME.findall(path.read_text()):
            found.setdefault(name, str(path.relative_to(PACKAGE)))
    return {name: where for name, where in found.items() if name not in NOT_ENVIRONMENT}


def test_every_environment_variable_the_package_reads_is_in_the_help() -> None:
    undocumented = {n: w for n, w in read_in_source().items() if n not in documented()}
    assert undocumented == {}


def test_the_help_lists_no_variable_the_package_does_not_read() -> None:
    assert documented() - set(read_in_source()) == set()


def test_the_scan_sees_reads_through_os_environ_and_getenv() -> None:
    """Every os.environ / getenv call names its variable by a quoted literal or a constant set
    from one, so the scan above cannot miss a variable."""
    reads = re.compile(r"(?:os\.environ(?:\.get)?|getenv)\(\s*([A-Za-z_\"'][^,)]*)")
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        for argument in reads.findall(text):
            if argument[0] in "\"'":
                continue
            assert re.search(rf"^{argument} = [\"']", text, re.MULTILINE), (path, argument)
