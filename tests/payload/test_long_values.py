"""A user value in an error line is cut at 80 characters, with its length: a 1 MB node id, op
name, key or argument must not make a 1 MB line (once per problem that names it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gpulab._shown import PATH_LIMIT, VALUE_LIMIT, shown
from gpulab.cli.main import main

from tests.graph.graph_helpers import cli, small_graph, write_graph

HUGE = 1_000_000
LINE_LIMIT = 600
"""Generous for one line with a few cut values and a path; a whole value would be 10^6."""


def cut(character: str, quote: bool = True, limit: int = VALUE_LIMIT, length: int = HUGE) -> str:
    head = character * limit
    return f"'{head}…' ({length} characters)" if quote else f"{head}… ({length} characters)"


def test_shown_cuts_only_what_is_longer_than_the_limit() -> None:
    assert shown("abc") == "'abc'"
    assert shown("abc", quote=False) == "abc"
    assert shown("a" * VALUE_LIMIT) == repr("a" * VALUE_LIMIT)
    assert shown("a" * HUGE) == cut("a")
    assert shown("a" * HUGE, quote=False) == cut("a", quote=False)
    assert shown("\n" * HUGE).startswith("'\\n\\n")  # still escaped: one line
    assert shown(2.5) == "2.5"
    assert shown(10**100) == f"{'1' + '0' * (VALUE_LIMIT - 1)}… (101 characters)"
    assert shown([1] * HUGE).endswith(f"… ({len(repr([1] * HUGE))} characters)")


def checked_lines(err: str, limit: int = LINE_LIMIT) -> list[str]:
    lines = err.splitlines()
    assert lines, "no message"
    assert all(len(line) < limit for line in lines), max(len(line) for line in lines)
    return lines


def test_huge_ids_op_names_keys_and_references_are_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node_id, op, key, reference = "i" * HUGE, "o" * HUGE, "k" * HUGE, "r" * HUGE
    document: dict[str, Any] = small_graph()
    document["inputs"][key] = {"type": "vector", "data": [1.0], key: 1}
    document["nodes"] += [
        {"id": node_id, "op": op, "inputs": {}},
        {"id": "m", "op": "sum", "inputs": {"x": reference}},
    ]
    document["outputs"] = ["s", "n", "u" * HUGE]
    code, out, err = cli(capsys, "validate", str(write_graph(tmp_path, document)))
    assert (code, out) == (2, "")
    lines = checked_lines(err)
    text = "\n".join(lines)
    assert f"nodes[2].op (node {cut('i')}): unknown op {cut('o')} (known: " in text
    assert f"inputs.{cut('k', quote=False)}.{cut('k', quote=False)}: unknown key" in text
    assert f"unknown reference {cut('r')} (not an input or a node id)" in text
    assert f"outputs[2]: unknown output {cut('u')} (not a node id or input)" in text


def test_huge_values_of_other_types_are_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document: dict[str, Any] = small_graph(version=[1] * HUGE)
    document["nodes"][0]["backend"] = "b" * HUGE
    document["nodes"][1]["params"] = {"p" * HUGE: 1}
    document["inputs"]["v"] = {"type": "vector", "file": "f" * HUGE}
    document["inputs"]["t"] = {"type": "t" * HUGE, "value": 1.0}
    code, out, err = cli(capsys, "validate", str(write_graph(tmp_path, document)))
    assert (code, out) == (2, "")
    text = "\n".join(checked_lines(err))
    assert "version: must be 1, got [1, 1, 1, " in text
    assert f"got {cut('b')}" in text
    assert f"params.{cut('p', quote=False)} (node 'n'): unknown param" in text
    assert f"must be the path of a .npy file, got {cut('f')}" in text
    assert f"inputs.t.type: must be one of scalar, vector, matrix, got {cut('t')}" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "GRAPH", "--backend", "x" * HUGE],
        ["run", "GRAPH", "--memory-budget", "x" * HUGE],
        ["run", "GRAPH", "--device", "x" * HUGE],
        ["validate", "GRAPH", "x" * HUGE],
    ],
    ids=["choice", "own-type", "device", "unrecognized"],
)
def test_huge_command_line_arguments_are_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    graph = str(write_graph(tmp_path, small_graph()))
    with pytest.raises(SystemExit) as raised:
        main([graph if part == "GRAPH" else part for part in argv])
    err = capsys.readouterr().err
    assert raised.value.code == 2
    assert "x" * (VALUE_LIMIT + 1) not in err
    assert f"{cut('x', quote=False)}" in err or f"{cut('x')}" in err
    checked_lines(err)


def test_paths_are_cut_at_the_longest_path_the_kernel_opens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "validate", "g" * HUGE)
    assert (code, out) == (2, "")
    graph = cut("g", quote=False, limit=PATH_LIMIT)
    assert checked_lines(err, PATH_LIMIT + LINE_LIMIT) == [
        f"gpulab: {graph}: cannot read the graph: File name too long"
    ]
    path = str(write_graph(tmp_path, small_graph()))
    code, out, err = cli(capsys, "run", path, "--backend", "cpu", "-o", "o" * HUGE)
    assert (code, out) == (2, "")
    output = cut("o", quote=False, limit=PATH_LIMIT)
    assert checked_lines(err, PATH_LIMIT + LINE_LIMIT) == [
        f"gpulab: --output {output}: File name too long"
    ]


def test_sizes_of_thousands_of_digits_are_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # JSON integers may have up to 4,300 digits; a size that long was echoed whole.
    huge = 10**3000
    document: dict[str, Any] = small_graph()
    document["inputs"]["x"] = {"type": "vector", "fill": {"n": huge, "value": 1.0}}
    document["inputs"]["y"] = {"type": "vector", "fill": {"n": -huge, "value": 1.0}}
    code, out, err = cli(capsys, "validate", str(write_graph(tmp_path, document)))
    assert (code, out) == (2, "")
    text = "\n".join(checked_lines(err))
    digits = "1" + "0" * (VALUE_LIMIT - 1)
    assert f"inputs.y.fill.n: must be at least 1, got -{digits[:-1]}… (3002 characters)" in text
    assert f"inputs.x: [{digits[:-1]}… (3003 characters) float32 values need" in text
    matrix = {"type": "matrix", "fill": {"rows": 2, "cols": huge, "value": 1.0}}
    document = small_graph(inputs={"A": matrix, "x": {"type": "vector", "data": [1.0, 2.0]}})
    document["nodes"] = [{"id": "m", "op": "matvec", "inputs": {"A": "A", "x": "x"}}]
    document["outputs"] = ["m"]
    code, out, err = cli(capsys, "validate", str(write_graph(tmp_path, document)))
    assert f"A is 2x{digits}… (3001 characters) so x needs {digits}… (3001 characters)" in err
    checked_lines(err)
    # Was a traceback: a size beyond any float (and a product beyond int-to-text's limit).
    matrix["fill"]["rows"] = huge
    code, out, err = cli(capsys, "validate", str(write_graph(tmp_path, document)))
    assert code == 2
    assert "float32 values need about 10^5992 GiB, only " in err
    checked_lines(err)
