"""The bash completion script: `complete -F _gpulab gpulab`, a `case` per subcommand."""

from __future__ import annotations

import argparse
import shlex

from gpulab.cli import completion_tree as tree

_FILES = 'compopt -o filenames; COMPREPLY=($(compgen -f -- "$cur"))'
# The hosts of ~/.ssh/config and known_hosts, where the bash-completion package is loaded.
_HOSTS = (
    "COMPREPLY=(); if declare -F _known_hosts_real >/dev/null; "
    'then _known_hosts_real -a -- "$cur"; fi'
)


def _value_words(action: argparse.Action) -> str:
    """The bash that fills COMPREPLY with the values of action (nothing for a number)."""
    if words := tree.choices(action):
        return f'COMPREPLY=($(compgen -W {shlex.quote(" ".join(words))} -- "$cur"))'
    if tree.takes_files(action):
        return _FILES
    if tree.takes_hosts(action):
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


def _command_case(command: tree.Command) -> str:
    """The `case` branch of one subcommand: the value after an option, more values of an
    option that takes several, a positional argument, else the options."""
    flags = shlex.quote(" ".join(s for a in command.options for s in a.option_strings))
    several = [a for a in command.options if tree.takes_several(a)]
    lines = [f"        {shlex.quote(command.name)})"]
    lines += _value_case("$prev", [a for a in command.options if tree.takes_value(a)], " " * 12)
    if several:
        lines.append("            if [[ $cur != -* ]]; then")
        lines += _value_case("$option", several, " " * 16)
        lines.append("            fi")
    if command.positionals:
        first = command.positionals[0]
        values = _value_words(first) if tree.choices(first) else _FILES
        lines.append(f"            if [[ $cur != -* ]]; then {values}; return; fi")
    lines += [f'            COMPREPLY=($(compgen -W {flags} -- "$cur"))', "            ;;"]
    return "\n".join(lines)


def script(parser: argparse.ArgumentParser) -> str:
    """The completion script for parser's program (`complete -F _gpulab gpulab`)."""
    commands = tree.subcommands(parser)
    top = shlex.quote(
        " ".join(
            [*(s for a in tree.options(parser) for s in a.option_strings)]
            + [command.name for command in commands]
        )
    )
    cases = "\n".join(_command_case(command) for command in commands)
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
