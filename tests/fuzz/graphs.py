"""Hypothesis strategies for graph documents: valid ones, then broken on purpose.

`valid_graphs` builds graphs whose references, kinds and shapes agree (every vector has one
length n, every matrix is n x n), so that a share of the cases really runs. `mutations` then
breaks a graph the ways users and attackers do: wrong JSON types at any path, huge, negative,
NaN and infinite sizes, cycles and self references, unknown ops, inputs and params, duplicate
ids, unicode and lone-surrogate names, deep nesting, files that are missing, not regular or
outside the graph's folder, empty graphs. `documents` turns a graph into the bytes of a file,
sometimes corrupted (truncated, non-UTF-8, another encoding, deeply nested, oversized numbers).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from gpulab.ops import OPS, Kind
from hypothesis import strategies as st

KIND_OF = {"scalar": Kind.SCALAR, "vector": Kind.VECTOR, "matrix": Kind.MATRIX}
FILE_N = 4
"""The length of the vectors (and size of the square matrices) in the .npy files."""
HUGE_SIZES = [2**36, 2**40, 2**62, 2**64 + 1, 10**30, 1e300]
"""Sizes no machine can hold: they must be refused before anything is allocated."""

NPY_FILES = {
    "v.npy": "vector",
    "m.npy": "matrix",
    "s.npy": "scalar (0-d)",
    "empty.npy": "empty vector",
    "c.npy": "complex vector",
    "obj.npy": "object array (pickle)",
    "bad.npy": "not an npy file",
    "nan.npy": "vector of NaN and inf",
    "fifo.npy": "a named pipe (opening it blocks)",
    "dir.npy": "a directory",
    "link.npy": "a symlink to v.npy",
    "sub/v.npy": "a vector in a subfolder",
}


def pick(draw: st.DrawFn, choices: Any) -> Any:
    """One of `choices`, drawn by index: cheaper than a new sampled_from strategy per draw
    (hypothesis caches integers(0, k) strategies; lists of graph parts are not hashable)."""
    options = list(choices)
    return options[draw(st.integers(0, len(options) - 1))]


def write_npy_files(folder: Path, n: int) -> None:
    """The files fuzzed graphs may name, beside the graph (vectors of n, matrices n x n)."""
    (folder / "sub").mkdir(exist_ok=True)
    np.save(folder / "v.npy", np.arange(n, dtype=np.float32))
    np.save(folder / "sub" / "v.npy", np.arange(n, dtype=np.float64))
    np.save(folder / "m.npy", np.eye(n, dtype=np.float32) * 4 + 1)
    np.save(folder / "s.npy", np.float32(2.0))
    np.save(folder / "empty.npy", np.zeros(0, dtype=np.float32))
    np.save(folder / "c.npy", np.ones(n, dtype=np.complex64))
    np.save(folder / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(
        folder / "nan.npy", np.array([np.nan, np.inf, -np.inf, 1.0][:n] * n, dtype=np.float32)[:n]
    )
    (folder / "bad.npy").write_bytes(b"\x93NUMPY garbage \xff\xfe")
    if not (folder / "fifo.npy").exists():
        os.mkfifo(folder / "fifo.npy")
    (folder / "dir.npy").mkdir(exist_ok=True)
    if not (folder / "link.npy").exists():
        (folder / "link.npy").symlink_to("v.npy")


FILE_PATHS = st.sampled_from(
    [
        *NPY_FILES,
        "missing.npy",
        "../v.npy",
        "../../../../../../etc/passwd.npy",
        "/etc/passwd.npy",
        "/dev/zero.npy",
        "sub/../v.npy",
        "v.npy\x00.npy",
        "v.NPY",
        "",
        ".npy",
        "~/v.npy",
        "\udcff.npy",
        "x" * 300 + ".npy",
    ]
)

NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=32),
)
SMALL_FLOATS = st.floats(-4, 4, allow_nan=False, allow_infinity=False, width=32)


def _vector_source(n: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.lists(SMALL_FLOATS, min_size=n, max_size=n).map(lambda d: {"data": d}),
        st.builds(
            lambda seed, low: {"random": {"n": n, "seed": seed, "low": low, "high": low + 1}},
            st.integers(0, 2**32),
            SMALL_FLOATS,
        ),
        SMALL_FLOATS.map(lambda v: {"fill": {"n": n, "value": v}}),
        st.just({"linspace": {"n": n, "start": -1.0, "stop": 1.0}}),
        *(
            [st.sampled_from(["v.npy", "link.npy", "sub/v.npy"]).map(lambda f: {"file": f})]
            if n == FILE_N
            else []
        ),
    )


def _matrix_source(n: int) -> st.SearchStrategy[dict[str, Any]]:
    rows = st.lists(SMALL_FLOATS, min_size=n, max_size=n)
    return st.one_of(
        st.lists(rows, min_size=n, max_size=n).map(lambda d: {"data": d}),
        st.integers(0, 99).map(lambda s: {"random": {"rows": n, "cols": n, "seed": s}}),
        SMALL_FLOATS.map(lambda v: {"fill": {"rows": n, "cols": n, "value": v}}),
        *([st.just({"file": "m.npy"})] if n == FILE_N else []),
    )


@st.composite
def valid_graphs(draw: st.DrawFn, n: int, node_backends: tuple[str, ...] = ()) -> dict[str, Any]:
    """A graph that validates: vectors of length n, n x n matrices, scalars."""
    kinds: dict[str, Kind] = {}
    inputs: dict[str, Any] = {}
    for name, kind in (
        ("x", Kind.VECTOR),
        ("y", Kind.VECTOR),
        ("A", Kind.MATRIX),
        ("a", Kind.SCALAR),
    ):
        kinds[name] = kind
        if kind is Kind.SCALAR:
            inputs[name] = {"type": "scalar", "value": draw(SMALL_FLOATS)}
        elif kind is Kind.VECTOR:
            inputs[name] = {"type": "vector", **draw(_vector_source(n))}
        else:
            inputs[name] = {"type": "matrix", **draw(_matrix_source(n))}
    nodes = []
    for index in range(draw(st.integers(1, 5))):
        op = pick(draw, sorted(OPS))
        spec = OPS[op]
        node_inputs: dict[str, Any] = {}
        for name, kind in spec.inputs:
            candidates = sorted(k for k, v in kinds.items() if v is kind)
            if kind is Kind.SCALAR and draw(st.booleans()):
                node_inputs[name] = draw(SMALL_FLOATS)
            else:
                node_inputs[name] = pick(draw, candidates)
        node: dict[str, Any] = {"id": f"n{index}", "op": op, "inputs": node_inputs}
        if op == "jacobi":
            node["params"] = {"iterations": draw(st.integers(0, 8))}
            if draw(st.booleans()):
                node["params"]["tolerance"] = pick(draw, [1e-6, 0.5, 1e30])
        if node_backends and draw(st.integers(0, 3)) == 0:
            node["backend"] = pick(draw, node_backends)
        nodes.append(node)
        kinds[node["id"]] = spec.result
    names = sorted(kinds)
    outputs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    graph = {
        "version": 1,
        "name": draw(NAMES),
        "inputs": inputs,
        "nodes": nodes,
        "outputs": outputs,
    }
    return graph


NAMES = st.one_of(
    st.sampled_from(["g", "x", "n0", "A", "ü-ñ", "名前", "\u202e", "a b", "a.b", "[0]"]),
    st.text(max_size=6),
    st.text(st.characters(exclude_categories=()), max_size=4),  # lone surrogates too
)


def _deep(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


ADVERSARIAL = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            False,
            0,
            -1,
            1.5,
            -0.0,
            2**31,
            2**63,
            *HUGE_SIZES,
            -(10**30),
            float("nan"),
            float("inf"),
            float("-inf"),
            "",
            "x",
            "n0",
            "vector",
            [],
            {},
            [1.0],
            [[1.0]],
            {"n": 3},
        ]
    ),
    NAMES,
    st.integers(),
    st.floats(),
    st.builds(_deep, st.integers(1, 60), st.sampled_from([1, "x", None])),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indexes) in a decoded JSON value, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += _paths(child, (*prefix, i))
    return found


def _parent(graph: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        graph = graph[step]
    return graph


def _replace(graph: Any, draw: st.DrawFn) -> Any:
    path = pick(draw, _paths(graph))
    value = draw(ADVERSARIAL)
    if not path:
        return value
    _parent(graph, path)[path[-1]] = value
    return graph


def _delete(graph: Any, draw: st.DrawFn) -> Any:
    paths = [p for p in _paths(graph) if p]
    if not paths:
        return graph
    path = pick(draw, paths)
    parent = _parent(graph, path)
    del parent[path[-1]]
    return graph


def _add_key(graph: Any, draw: st.DrawFn) -> Any:
    objects = [p for p in _paths(graph) if isinstance(_parent(graph, (*p, None)), dict)]
    if not objects:
        return graph
    target = _parent(graph, (*pick(draw, objects), None))
    key = draw(st.one_of(NAMES, st.sampled_from(["param", "input", "op", "type", "n", "file"])))
    target[key] = draw(ADVERSARIAL)
    return graph


def _nodes(graph: Any) -> list[Any]:
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def _duplicate_node(graph: Any, draw: st.DrawFn) -> Any:
    nodes = _nodes(graph)
    if nodes:
        graph["nodes"].append(copy.deepcopy(pick(draw, nodes)))
    return graph


def _rewire(graph: Any, draw: st.DrawFn) -> Any:
    """A node input pointed at itself, at a later node (a cycle), or at nothing."""
    nodes = _nodes(graph)
    if not nodes:
        return graph
    node = pick(draw, nodes)
    inputs = node.get("inputs")
    if not isinstance(inputs, dict) or not inputs:
        return graph
    name = pick(draw, sorted(inputs, key=str))
    ids = [n.get("id") for n in nodes]
    inputs[name] = pick(draw, [node.get("id"), *ids, "nowhere", "", "x", "A"])
    return graph


def _set_size(graph: Any, draw: st.DrawFn) -> Any:
    """A random/fill/linspace extent set to something unusable or enormous."""
    specs = graph.get("inputs") if isinstance(graph, dict) else None
    if not isinstance(specs, dict):
        return graph
    extents = [
        source
        for spec in specs.values()
        if isinstance(spec, dict)
        for key in ("random", "fill", "linspace")
        if isinstance(source := spec.get(key), dict)
    ]
    if not extents:
        return graph
    target = pick(draw, extents)
    key = pick(draw, ["n", "rows", "cols", "seed"])
    target[key] = draw(
        st.one_of(
            st.sampled_from([0, -1, -(2**63), 1.5, float("nan"), float("inf"), True, "3"]),
            st.sampled_from(HUGE_SIZES),
        )
    )
    return graph


def _set_file(graph: Any, draw: st.DrawFn) -> Any:
    specs = graph.get("inputs") if isinstance(graph, dict) else None
    if not isinstance(specs, dict) or not specs:
        return graph
    name = pick(draw, sorted(specs, key=str))
    kind = pick(draw, ["vector", "matrix", "scalar"])
    specs[name] = {"type": kind, "file": draw(FILE_PATHS)}
    return graph


def _set_op(graph: Any, draw: st.DrawFn) -> Any:
    nodes = _nodes(graph)
    if nodes:
        node = pick(draw, nodes)
        node["op"] = draw(
            st.one_of(st.sampled_from([*OPS, "conv2d", "SUM", "", "__class__"]), NAMES)
        )
    return graph


def _set_param(graph: Any, draw: st.DrawFn) -> Any:
    nodes = _nodes(graph)
    if nodes:
        node = pick(draw, nodes)
        name = pick(draw, ["iterations", "tolerance", "iteration", "alpha"])
        node["params"] = {name: draw(ADVERSARIAL)}
    return graph


def _empty(graph: Any, draw: st.DrawFn) -> Any:
    return draw(
        st.sampled_from(
            [
                {},
                [],
                {"version": 1},
                {"version": 1, "nodes": [], "outputs": []},
                {"version": 1, "inputs": {}, "nodes": [{}], "outputs": [""]},
            ]
        )
    )


MUTATIONS = (
    _replace,
    _replace,
    _delete,
    _add_key,
    _duplicate_node,
    _rewire,
    _rewire,
    _set_size,
    _set_file,
    _set_op,
    _set_param,
    _empty,
)


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[dict[str, Any]], most: int = 3) -> Any:
    """A graph from `base` with 0 to `most` mutations applied."""
    graph: Any = copy.deepcopy(draw(base))
    # Unchanged twice as often as any other count: a share of the cases must really run.
    for _ in range(pick(draw, [0, *range(most + 1)])):
        graph = pick(draw, MUTATIONS)(graph, draw)
    return graph


def _text(graph: Any) -> str:
    return json.dumps(graph)


@st.composite
def documents(draw: st.DrawFn, graphs: st.SearchStrategy[Any]) -> bytes:
    """The bytes of a graph file: usually its JSON, sometimes corrupted."""
    text = _text(draw(graphs))
    how = draw(st.integers(0, 19))
    data = text.encode("utf-8", "surrogatepass")
    if how == 0:  # truncated
        return data[: draw(st.integers(0, len(data)))]
    if how == 1:  # a byte that is not UTF-8, somewhere
        at = draw(st.integers(0, len(data)))
        return data[:at] + pick(draw, [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"]) + data[at:]
    if how == 2:
        return text.encode("utf-16")
    if how == 3:
        return b"\xef\xbb\xbf" + data  # a UTF-8 byte order mark
    if how == 4:  # nested far deeper than any parser recursion limit
        depth = pick(draw, [100, 1000, 30_000])
        return b"[" * depth + b"]" * depth
    if how == 5:  # a number with more digits than int() accepts
        return data.replace(b"1", b"1" + b"7" * 5000, 1) if b"1" in data else b"1" * 5000
    if how == 6:  # the same key twice
        return data.replace(b'"nodes"', b'"nodes": [], "nodes"', 1)
    return data
