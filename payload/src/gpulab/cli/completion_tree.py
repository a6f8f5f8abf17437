"""What the completion scripts read from the argparse tree: the subcommands, their options and
positionals, and what each one's value completes with (choices, file names, SSH hosts, nothing).

One reading for every shell, so bash, zsh and fish offer the same words.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PATH_WORDS = ("FILE", "DIR", "KEY", "PATH", "OUT", ".JSON", ".PNG", ".PROM")
"""A metavar with one of these names a file, so its value completes as a file name."""
_SUMMARY_END = re.compile(r": | \(|; |\. ")
"""Where a help text's first clause ends: what a completion menu shows of it."""


class WordArgument(argparse.Action):
    """A positional that completes with fixed words but is checked by its command, so a wrong
    word gets the command's one-line error instead of argparse's usage and choices."""

    def __init__(self, *args: Any, words: Sequence[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.words = tuple(words)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)


@dataclass(frozen=True)
class Command:
    """One subcommand as the completion scripts see it."""

    name: str
    summary: str
    options: list[argparse.Action]
    positionals: list[argparse.Action]


def subcommands(parser: argparse.ArgumentParser) -> list[Command]:
    """parser's subcommands in the order `--help` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {pseudo.dest: pseudo.help or "" for pseudo in action._choices_actions}
            return [
                Command(name, _clean(helps.get(name, "")), options(sub), positionals(sub))
                for name, sub in action.choices.items()
            ]
    return []


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """parser's options (`-h` included)."""
    return [a for a in parser._actions if a.option_strings]


def positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """parser's positional arguments, the subcommands' own excepted."""
    return [
        a
        for a in parser._actions
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    ]


def takes_value(action: argparse.Action) -> bool:
    """Whether the option is followed by a value (`--backend cpu`, not `--json`)."""
    return action.nargs != 0


def takes_several(action: argparse.Action) -> bool:
    """Whether the option takes several values (`--ops copy saxpy`)."""
    return action.nargs in ("+", "*")


def choices(action: argparse.Action) -> list[str]:
    """The words the value is one of; empty when it is free."""
    if isinstance(action, WordArgument):
        return list(action.words)
    return [str(choice) for choice in action.choices or ()]


def takes_files(action: argparse.Action) -> bool:
    """Whether the value names a file (a graph, an output, a key)."""
    metavar = str(action.metavar or "").upper()
    return action.type is Path or any(word in metavar for word in _PATH_WORDS)


def takes_hosts(action: argparse.Action) -> bool:
    """Whether the value is an SSH host ([USER@]HOST)."""
    return "HOST" in str(action.metavar or "")


def summary(action: argparse.Action) -> str:
    """The first clause of action's help, one line."""
    text = str(action.help or "")
    if action.help == argparse.SUPPRESS:
        return ""
    text = text.replace("%(default)s", str(action.default)).replace("%%", "%")
    return _clean(text)


def _clean(text: str) -> str:
    first = _SUMMARY_END.split(" ".join(text.split()), maxsplit=1)[0]
    return first.rstrip(".")
