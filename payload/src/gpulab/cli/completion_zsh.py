"""The zsh completion script: `_arguments` specs per subcommand, written from the parser.

Works sourced after compinit (`compdef _gpulab gpulab`) and as an autoloaded `_gpulab` file on
$fpath (its `#compdef gpulab` line), like zsh's own completion functions.
"""

from __future__ import annotations

import argparse
import re

from gpulab.cli import completion_tree as tree

_HOSTS = """\
# [USER@]HOST: the Host aliases of ~/.ssh/config (patterns left out), then zsh's own hosts
# (/etc/hosts, known_hosts).
_gpulab_hosts() {
    local -a aliases expl
    local key rest ret=1
    compset -P '*@'
    if [[ -r ~/.ssh/config ]]; then
        while read -r key rest; do
            [[ ${(L)key} == host ]] && aliases+=(${=rest})
        done < ~/.ssh/config
    fi
    _wanted hosts expl 'SSH host' compadd - ${aliases:#*[*?!]*} && ret=0
    _hosts && ret=0
    return ret
}
"""
_SEVERAL = """\
                    if [[ $state == several ]]; then
                        # More values of the nearest option before the word (--ops copy sa).
                        local i
                        for ((i = CURRENT - 1; i > 1; i--)); do [[ $words[i] == -* ]] && break; done
                        case $words[i] in
{branches}
                        esac
                    fi"""


def _quote(text: str) -> str:
    """text as one zsh word, single-quoted."""
    return "'" + text.replace("'", "'\\''") + "'"


def _escape(text: str, special: str) -> str:
    """text with a backslash before each character of special (and before backslashes)."""
    return re.sub(f"([\\\\{re.escape(special)}])", r"\\\1", text)


def _action(action: argparse.Action) -> str:
    """The `_arguments` action that completes action's value (empty: a message only)."""
    if words := tree.choices(action):
        return "(" + " ".join(_escape(word, " ()'\"$`:") for word in words) + ")"
    if tree.takes_files(action):
        return "_files"
    if tree.takes_hosts(action):
        return "_gpulab_hosts"
    return ""


def _message(action: argparse.Action) -> str:
    name = action.metavar or action.dest
    return _escape(str(name if isinstance(name, str) else action.dest), ":")


def _option_specs(action: argparse.Action) -> list[str]:
    """One `_arguments` spec per option string: the strings exclude each other, a value's
    message and action follow the description."""
    description = "[" + _escape(tree.summary(action), "[]") + "]"
    repeats = isinstance(action, argparse._AppendAction | argparse._CountAction)
    exclusion = "*" if repeats else "(" + " ".join(action.option_strings) + ")"
    value = ""
    if tree.takes_value(action):
        value = f":{_message(action)}:{_action(action)}"
    return [exclusion + flag + description + value for flag in action.option_strings]


def _arguments(specs: list[str], indent: str) -> str:
    """`_arguments -C` over specs, one per line, setting ret."""
    lines = [f"{indent}_arguments -C \\"]
    lines += [f"{indent}    {_quote(spec)} \\" for spec in specs]
    lines.append(f"{indent}    && ret=0")
    return "\n".join(lines)


def _command_branch(command: tree.Command) -> str:
    """The `case` branch of one subcommand."""
    specs = [spec for action in command.options for spec in _option_specs(action)]
    specs += [f":{_message(a)}:{_action(a) or '_files'}" for a in command.positionals]
    several = [a for a in command.options if tree.takes_several(a)]
    if several:
        specs.append("*: :->several")
    lines = [f"                ({command.name})", _arguments(specs, " " * 20)]
    if several:
        branches = [
            f"                            ({'|'.join(a.option_strings)}) "
            f"_wanted values expl {_quote(str(_message(a)))} compadd - {' '.join(tree.choices(a))}"
            " && ret=0 ;;"
            for a in several
            if tree.choices(a)
        ]
        lines.append(_SEVERAL.format(branches="\n".join(branches)))
    lines.append("                    ;;")
    return "\n".join(lines)


def script(parser: argparse.ArgumentParser) -> str:
    """The completion script for parser's program (`compdef _gpulab gpulab`)."""
    commands = tree.subcommands(parser)
    top = [spec for action in tree.options(parser) for spec in _option_specs(action)]
    top += [":command:->command", "*:: :->argument"]
    described = "\n".join(
        f"                {_quote(_escape(c.name, ':') + ':' + c.summary)}" for c in commands
    )
    branches = "\n".join(_command_branch(command) for command in commands)
    return f"""#compdef gpulab
# zsh completion for gpulab, written by `gpulab completion zsh`.

{_HOSTS}
_gpulab() {{
    local curcontext=$curcontext state state_descr line expl ret=1
    local -A opt_args
{_arguments(top, " " * 4)}
    case $state in
        (command)
            local -a commands=(
{described}
            )
            _describe -t commands 'gpulab command' commands && ret=0
            ;;
        (argument)
            curcontext=${{curcontext%:*:*}}:gpulab-$words[1]:
            case $words[1] in
{branches}
            esac
            ;;
    esac
    return ret
}}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _gpulab "$@"
else
    compdef _gpulab gpulab
fi
"""
