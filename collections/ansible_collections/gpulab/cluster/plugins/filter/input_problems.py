# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Filter gpulab.cluster.input_problems: role values that would break out of the configuration
line or command they are written into, one sentence each."""

from __future__ import annotations

import json
import re
from typing import Any

DOCUMENTATION = r"""
---
name: input_problems
short_description: The role values that cannot be written safely where they go, one sentence each
description:
  - Every role value that reaches a configuration file or a command line is checked against the
    shape of what belongs there, so that no value can add a line or a key of its own (a newline,
    a space followed by C(Key=Value), a quote that ends a quoted string).
  - Lists are checked item by item and dictionaries key by key (keys as C(key)) and value by value,
    and each problem names the variable, the item and the value (its first 80 characters).
  - "Kinds: C(name) letters, digits and C(_ . + -), starting with a letter or digit (Slurm node
    features, GRES types, user and group names); C(key) letters and digits (a Slurm configuration
    key); C(word) one word without whitespace, C(#), C(\"), C(\\) or C(=) (one value of a
    C(Key=Value) pair); C(value) the same but C(=) allowed (a Slurm option value such as
    C(TRESBillingWeights=CPU=1.0)); C(path) an absolute path of letters, digits and C(_ . + - @ /);
    C(slurm_time) Slurm's time format (C(INFINITE), C(UNLIMITED), C(MM), C(MM:SS), C(HH:MM:SS),
    C(D-HH), C(D-HH:MM), C(D-HH:MM:SS)); C(cpu_list) CPU ids and ranges (C(0-15,32)); C(host) a host
    name or address; C(gecos) one line without C(:) (an /etc/passwd field); C(text) any text on
    one line without C(\") C(\\) C($) or a backquote (inside a double-quoted shell or systemd
    value); C(file_name) a file name of letters, digits and C(_ . -) (what apt reads in
    C(sources.list.d)); C(uri) a URI, C(scheme:rest), without whitespace, C(#), C(\") or C(\\) (an
    apt source); C(http_url) an C(http://) or C(https://) URL without whitespace, C(\"), C(\\),
    C(;), C(#) or braces (inside a quoted apt.conf value); C(signed_by) a keyring's absolute path or
    one ASCII-armored public key block (an apt source's C(Signed-By))."
version_added: "2.0.0"
author: gpulab contributors (@gpulab)
options:
  _input:
    description: Each variable's name mapped to a pair, its value and its kind.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check every value that reaches gres.conf
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "slurm: on {{ inventory_hostname }}, {{ _problems | join('; ') }}."
  vars:
    _problems: >-
      {{ {'slurm_node_features': [slurm_node_features, 'name'],
          'slurm_node_gpus[].file': [slurm_node_gpus | map(attribute='file') | list, 'path']}
         | gpulab.cluster.input_problems }}
"""

RETURN = r"""
_value:
  description: One sentence per value that does not fit its kind; empty when all fit.
  type: list
  elements: str
"""

# An absolute path without '..' steps: a path's and a keyring's (signed_by) pattern.
_ABSOLUTE_PATH = r"(?!.*/\.\.(?:/|$))/[A-Za-z0-9_.+@/-]*"

# kind: (the whole value's pattern, what it must be, for the sentence)
_KINDS: dict[str, tuple[re.Pattern[str], str]] = {
    kind: (re.compile(pattern), must)
    for kind, (pattern, must) in {
        "name": (r"[A-Za-z0-9][A-Za-z0-9_.+-]*", "a name of letters, digits, _ . + or -"),
        "key": (r"[A-Za-z][A-Za-z0-9]*", "a key of letters and digits"),
        "word": (r"[^\s#\"\\=]+", "one word without whitespace, '#', '\"', '\\' or '='"),
        "value": (r"[^\s#\"\\]+", "one word without whitespace, '#', '\"' or '\\'"),
        "path": (
            _ABSOLUTE_PATH,
            "an absolute path of letters, digits, _ . + - @ and /, without ..",
        ),
        "slurm_time": (
            r"INFINITE|UNLIMITED|\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}"
            r"|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2}",
            "Slurm's time format (INFINITE, MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)",
        ),
        "cpu_list": (r"\d+(-\d+)?(,\d+(-\d+)?)*", "CPU ids and ranges such as 0-15,32"),
        "host": (
            r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+",
            "a host name or address",
        ),
        "gecos": (r"[^\n\r:]*", "one line without ':' (an /etc/passwd field)"),
        "text": (r"[^\n\r\"\\$`]*", "one line without '\"', '\\', '$' or '`'"),
        "file_name": (r"[A-Za-z0-9][A-Za-z0-9_.-]*", "a file name of letters, digits, _ . or -"),
        "uri": (
            r"[A-Za-z][A-Za-z0-9+.-]*:[^\s#\"\\]+",
            "a URI (scheme:...) without whitespace, '#', '\"' or '\\'",
        ),
        "http_url": (
            r"https?://[^\s#\"\\;{}]+",
            "an http:// or https:// URL without whitespace, '#', '\"', '\\', ';' or braces",
        ),
        "signed_by": (
            _ABSOLUTE_PATH + r"|-----BEGIN PGP PUBLIC KEY BLOCK-----\n[ -~\n]*\n"
            r"-----END PGP PUBLIC KEY BLOCK-----\n?",
            "a keyring's absolute path, or one ASCII-armored public key block",
        ),
    }.items()
}


def _shown(value: Any) -> str:
    """The value as JSON, cut at 80 characters: a refusal must stay one readable line."""
    text = json.dumps(
        value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
    )
    return text if len(text) <= 80 else f"{text[:77]}... ({len(text)} characters)"


def _check(name: str, value: Any, kind: str, problems: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _check(f"{name} key", key, "key", problems)
            _check(f"{name}[{json.dumps(str(key))[:40]}]", item, kind, problems)
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check(f"{name}[{index}]", item, kind, problems)
        return
    if value is None:
        return  # optional and unset
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        problems.append(f"{name} {_shown(value)} must be {_KINDS[kind][1]}")
        return
    pattern, must = _KINDS[kind]
    if pattern.fullmatch(str(value)) is None:
        problems.append(f"{name} {_shown(value)} must be {must}")


def input_problems(values: dict[str, Any]) -> list[str]:
    """One sentence per value of `values` ({name: [value, kind]}) that does not fit its kind."""
    problems: list[str] = []
    for name, (value, kind) in values.items():
        if kind not in _KINDS:
            raise ValueError(f"input_problems: unknown kind {kind!r} for {name}")
        _check(name, value, kind, problems)
    return problems


class FilterModule:
    """gpulab.cluster.input_problems."""

    def filters(self) -> dict[str, Any]:
        return {"input_problems": input_problems}
