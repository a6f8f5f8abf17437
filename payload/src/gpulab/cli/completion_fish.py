"""The fish completion script: one `complete -c gpulab` line per subcommand, option and value,
each under a condition on the subcommand, written from the parser."""

from __future__ import annotations

import argparse

from gpulab.cli import completion_tree as tree

_FUNCTIONS = """\
# The subcommand: the first word after gpulab that is not an option (gpulab's own options take
# no value); none before it is typed.
function __gpulab_command
    set -l words (commandline -opc)
    for word in $words[2..-1]
        if not string match -q -- '-*' $word
            echo $word
            return
        end
    end
end

function __gpulab_using --argument-names command
    set -l used (__gpulab_command)
    test "$used" = "$command"
end

# More values of an option that takes several (--ops copy sa): the nearest option before the
# word is OPTION, under COMMAND.
function __gpulab_values_of --argument-names command option
    __gpulab_using $command; or return
    set -l words (commandline -opc)
    for word in $words[-1..2]
        if string match -q -- '-*' $word
            test "$word" = "$option"
            return
        end
    end
    return 1
end
"""


def _quote(text: str) -> str:
    """text as one fish word, single-quoted."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _flags(action: argparse.Action) -> list[str]:
    """fish's -s/-l/-o for each of action's option strings."""
    flags = []
    for option in action.option_strings:
        if option.startswith("--"):
            flags += ["-l", option[2:]]
        elif len(option) == 2:
            flags += ["-s", option[1:]]
        else:
            flags += ["-o", option[1:]]
    return flags


def _values(action: argparse.Action) -> list[str]:
    """The arguments of `complete` that give action's values (none for a flag)."""
    if words := tree.choices(action):
        return ["-x", "-a", _quote(" ".join(words))]
    if tree.takes_files(action):
        return ["-r", "-F"]
    if tree.takes_hosts(action):
        return ["-x", "-a", "'(__fish_complete_user_at_hosts)'"]
    return ["-x"]


def _line(condition: str, *arguments: str, description: str = "") -> str:
    words = ["complete", "-c", "gpulab", "-n", _quote(condition), *arguments]
    if description:
        words += ["-d", _quote(description)]
    return " ".join(words)


def _option(condition: str, action: argparse.Action) -> str:
    values = _values(action) if tree.takes_value(action) else []
    return _line(condition, *_flags(action), *values, description=tree.summary(action))


def _command_lines(command: tree.Command) -> list[str]:
    using = f"__gpulab_using {command.name}"
    lines = [f"# gpulab {command.name}"]
    lines += [_option(using, action) for action in command.options]
    for positional in command.positionals[:1]:
        words = tree.choices(positional)
        values = ["-a", _quote(" ".join(words))] if words else ["-F"]
        lines.append(_line(using, *values, description=tree.summary(positional)))
    for action in command.options:
        if tree.takes_several(action) and tree.choices(action):
            condition = f"__gpulab_values_of {command.name} {action.option_strings[-1]}"
            for option in action.option_strings[:-1]:
                condition += f"; or __gpulab_values_of {command.name} {option}"
            lines.append(_line(condition, "-a", _quote(" ".join(tree.choices(action)))))
    return lines


def script(parser: argparse.ArgumentParser) -> str:
    """The completion script for parser's program (`complete -c gpulab`)."""
    commands = tree.subcommands(parser)
    lines = [
        "# fish completion for gpulab, written by `gpulab completion fish`.",
        "",
        _FUNCTIONS,
        "# No file names unless a value or an argument is one.",
        "complete -c gpulab -f",
        "",
        "# gpulab's own options and the subcommands",
    ]
    lines += [_option("__gpulab_using ''", action) for action in tree.options(parser)]
    lines += [
        _line("__gpulab_using ''", "-a", _quote(command.name), description=command.summary)
        for command in commands
    ]
    for command in commands:
        lines += ["", *_command_lines(command)]
    return "\n".join(lines) + "\n"
