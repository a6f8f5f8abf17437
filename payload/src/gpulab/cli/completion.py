"""`gpulab completion bash`: a bash completion script written from the argparse tree itself,
so it offers exactly the subcommands, options and choices of this gpulab.

Install: `eval "$(gpulab completion bash)"` in ~/.bashrc, or the output saved as
~/.local/share/bash-completion/completions/gpulab.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from gpulab.cli.errors import EXIT_OK

SHELLS = ("bash",)
_PATH_WORDS = ("FILE", "DIR", "KEY", "PATH", "OUT", ".JSON", ".PNG", ".PROM")
"""A metavar with one of these names a file, so its value completes as a file name."""
_FILES = 'compopt -o filenames; COMPREPLY=($(compgen -f -- "$cur"))'
# The hosts of ~/.ssh/config and known_hosts, where the bash-completion package is loaded.
_HOSTS = (
    "COMPREPLY=(); if declare -F _known_hosts_real >/dev/null; "
    'then _known_hosts_real -a -- "$cur"; fi'
)


def add_parser(commands: Any) -> None:
    """Register `completion` on the subcommand parsers."""
    parser = commands.add_parser(
        "completion",
        help="print a shell completion script (bash)",
        description='Print the completion script for SHELL. Bash: eval "$(gpulab completion '
        'bash)" in ~/.bashrc, or save the output as '
        "~/.local/share/bash-completion/completions/gpulab.",
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell: bash")
    parser.set_defaults(handler=main)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings]


def _takes_files(action: argparse.Action) -> bool:
    metavar = str(action.metavar or "").upper()
    return action.type is Path or any(word in metavar for word in _PATH_WORDS)


def _value_words(action: argparse.Action) -> str:
    """The bash that fills COMPREPLY with the values of action (nothing for a number)."""
    if action.choices:
        words = shlex.quote(" ".join(str(choice) for choice in action.choices))
        return f'COMPREPLY=($(compgen -W {words} -- "$cur"))'
    if _takes_files(action):
        return _FILES
    if "HOST" in str(action.metavar):
        return _HOSTS
    return "COMPREPLY=()"


def _value_case(word: str, actions: list[argparse.Action], indent: str) -> list[str]:
    """A bash `case` on word: each option's values, then return (none without actions)."""
    if not actions:
        return []
    branches = [
        f"{indent}    {'|'.join(a.option_strings)}) {_value_words(a)}; return ;;" for a in actions
    ]
    return [f'{indent}case "{word}" in', *branches, f"{indent}esac"]


def _command_case(name: str, parser: argparse.ArgumentParser) -> str:
    """The `case` branch of one subcommand: the value after an option, more values of an
    option that takes several, a positional argument, else the options."""
    options = _options(parser)
    flags = shlex.quote(" ".join(s for a in options for s in a.option_strings))
    several = [a for a in options if a.nargs in ("+", "*")]
    positionals = [a for a in parser._actions if not a.option_strings]
    lines = [f"        {shlex.quote(name)})"]
    lines += _value_case("$prev", [a for a in options if a.nargs != 0], " " * 12)
    if several:
        lines.append("            if [[ $cur != -* ]]; then")
        lines += _value_case("$option", several, " " * 16)
        lines.append("            fi")
    if positionals:
        first = positionals[0]
        values = _value_words(first) if first.choices else _FILES
        lines.append(f"            if [[ $cur != -* ]]; then {values}; return; fi")
    lines += [f'            COMPREPLY=($(compgen -W {flags} -- "$cur"))', "            ;;"]
    return "\n".join(lines)


def bash_script(parser: argparse.ArgumentParser) -> str:
    """The completion script for parser's program (`complete -F _gpulab gpulab`)."""
    commands = _subcommands(parser)
    top = shlex.quote(
        " ".join([*(s for a in _options(parser) for s in a.option_strings), *commands])
    )
    cases = "\n".join(_command_case(name, sub) for name, sub in commands.items())
    return f"""# bash completion for gpulab, written by `gpulab completion bash`.
_gpulab() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
    local command="" option="" i
    # The subcommand: the first word that is not an option (gpulab's own options take no value).
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${{COMP_WORDS[i]}} != -* ]]; then command=${{COMP_WORDS[i]}}; break; fi
    done
    # The nearest option before the word, for options that take several values (--ops a b).
    for ((i = COMP_CWORD - 1; i > 1; i--)); do
        if [[ ${{COMP_WORDS[i]}} == -* ]]; then option=${{COMP_WORDS[i]}}; break; fi
    done
    case "$command" in
        "")
            COMPREPLY=($(compgen -W {top} -- "$cur"))
            ;;
{cases}
    esac
}}
complete -F _gpulab gpulab
"""


def main(args: argparse.Namespace) -> int:
    """Print the script for args.shell."""
    from gpulab.cli.main import build_parser  # noqa: PLC0415 - main imports this module

    print(bash_script(build_parser()), end="")
    return EXIT_OK
