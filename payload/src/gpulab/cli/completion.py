"""`gpulab completion SHELL`: a completion script for bash, zsh or fish, written from the argparse
tree itself, so it offers exactly the subcommands, options and choices of this gpulab.

Install: bash, `eval "$(gpulab completion bash)"` in ~/.bashrc; zsh, `source <(gpulab completion
zsh)` in ~/.zshrc after compinit, or the output saved as `_gpulab` in a directory of $fpath; fish,
the output saved as ~/.config/fish/completions/gpulab.fish.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from gpulab.cli import completion_bash, completion_fish, completion_zsh
from gpulab.cli.completion_tree import WordArgument
from gpulab.cli.errors import EXIT_INPUT, EXIT_OK

SCRIPTS: dict[str, Callable[[argparse.ArgumentParser], str]] = {
    "bash": completion_bash.script,
    "zsh": completion_zsh.script,
    "fish": completion_fish.script,
}
SHELLS = tuple(SCRIPTS)


def add_parser(commands: Any) -> None:
    """Register `completion` on the subcommand parsers."""
    parser = commands.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh, fish)",
        description='Print the completion script for SHELL. Bash: eval "$(gpulab completion '
        'bash)" in ~/.bashrc. Zsh: source <(gpulab completion zsh) in ~/.zshrc after compinit, '
        "or save the output as _gpulab in a directory of $fpath. Fish: save the output as "
        "~/.config/fish/completions/gpulab.fish.",
    )
    parser.add_argument(
        "shell", action=WordArgument, words=SHELLS, metavar="SHELL", help="bash, zsh or fish"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the script for args.shell; an unknown shell is one line and exit 2."""
    from gpulab.cli.main import build_parser  # noqa: PLC0415 - main imports this module

    write = SCRIPTS.get(args.shell)
    if write is None:
        print(
            f"gpulab completion: unknown shell {args.shell!r}: choose {', '.join(SHELLS)}",
            file=sys.stderr,
        )
        return EXIT_INPUT
    print(write(build_parser()), end="")
    return EXIT_OK
