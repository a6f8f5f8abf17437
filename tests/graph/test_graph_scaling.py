"""Validation and scheduling stay linear in the number of outputs (20,000 took 14 s when every
membership test scanned the outputs tuple), and a graph of many nodes is validated with little
work and memory per node (10^6 nodes took 42 s and 2.3 GB). Counted (string comparisons,
Python calls, collections, traced bytes), not timed."""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any
from unittest import mock

import pytest
from gpulab.cli import graph_file
from gpulab.cli.main import main
from gpulab.graph import load_graph, schedule, validate
from gpulab.graph.schedule import peak_bytes
from gpulab.running.runner import split

OUTPUTS = 20_000


class CountedName(str):
    """A name that counts the equality tests made with it (a tuple scan makes one per item)."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        CountedName.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def many_outputs(count: int) -> dict[str, Any]:
    names = [CountedName(f"s{i}") for i in range(count)]
    return {
        "version": 1,
        "inputs": {"x": {"type": "vector", "data": [1.0, 2.0]}},
        "nodes": [{"id": name, "op": "sum", "inputs": {"x": "x"}} for name in names],
        "outputs": [CountedName(str(name)) for name in names],  # equal, not the same objects
    }


def test_validation_and_split_compare_names_a_linear_number_of_times() -> None:
    CountedName.comparisons = 0
    graph = validate(many_outputs(OUTPUTS), Path.cwd())
    segments = split(graph, "cpu")
    assert len(graph.outputs) == OUTPUTS
    assert len(segments[0][1].exports) == OUTPUTS
    # A linear pass compares each name a few times; the quadratic one made 2 x 10^8.
    assert CountedName.comparisons < 20 * OUTPUTS


NODES = 20_000


def many_nodes(shape: str, count: int = NODES) -> dict[str, Any]:
    """`chain`: each scale node reads the one before; `fan`: every one reads the input."""
    nodes = [
        {
            "id": f"n{i}",
            "op": "scale",
            "inputs": {"x": "x" if shape == "fan" or i == 0 else f"n{i - 1}", "a": 2.0},
        }
        for i in range(count)
    ]
    return {
        "version": 1,
        "inputs": {"x": {"type": "vector", "data": [1.0, 2.0, 3.0, 4.0]}},
        "nodes": nodes,
        "outputs": [f"n{count - 1}"] if shape == "chain" else [n["id"] for n in nodes],
    }


@pytest.fixture(params=["chain", "fan"])
def many_nodes_file(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(many_nodes(request.param)), encoding="utf-8")
    yield path


def test_a_large_graph_takes_few_python_calls_per_node(many_nodes_file: Path) -> None:
    # Was: 61 a node (checks and objects field by field, Kahn's queue and a set per node,
    # the schedule's lists): 42 s for 10^6 nodes.
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        graph = load_graph(many_nodes_file)
    finally:
        sys.setprofile(None)
    assert len(graph.nodes) == NODES
    assert calls < 20 * NODES


def test_the_cycle_collector_stays_out_of_loading(many_nodes_file: Path) -> None:
    # Was: 490 collections for 20,000 nodes, 4 of them full; each walks every object made so
    # far (the decoded JSON, the model), which made 10^6 nodes slower than linear.
    collections: list[int] = []

    def started(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(started)
    try:
        load_graph(many_nodes_file)
    finally:
        gc.callbacks.remove(started)
    assert len(collections) <= 1  # the one the first allocation after may start
    assert gc.isenabled()


def test_a_graph_file_is_held_once_as_json_and_model(many_nodes_file: Path) -> None:
    # Was: the JSON kept whole beside the model, a parsed copy of every node, Kahn's sets and
    # the schedule's lists at once, and a 256 MiB read buffer: 2.3 GB for 10^6 nodes.
    tracemalloc.start()
    try:
        graph = load_graph(many_nodes_file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000 * NODES
    assert "nodes" not in graph.source  # each node's JSON was dropped once parsed
    assert graph.outputs[-1] == f"n{NODES - 1}"


def test_the_peak_of_a_large_graph_is_the_schedules(tmp_path: Path) -> None:
    # Validation checks the peak without the schedule's lists; both must say the same.
    document = many_nodes("chain", 1_000)
    document["outputs"] = ["n10", "n999"]
    graph = validate(document, tmp_path)
    plan = schedule(graph)
    # n10 stays (an output), so from n12 on three vectors of 16 bytes are held at once.
    assert (plan.peak_bytes, plan.peak_after) == peak_bytes(graph) == (3 * 16, "n12")
    assert (plan.releases["n10"], plan.releases["n12"]) == (("n9",), ("n11",))


def test_a_command_freezes_its_graph_and_hands_the_collector_back(
    many_nodes_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The graph is frozen out of the collector's walks while the command runs (the first
    # collection after loading walked 10^6 nodes' objects for half a second), and given back
    # after, so that a program calling main() again keeps a collector that sees its garbage.
    frozen: list[int] = []
    real_freeze = gc.freeze

    def freeze_and_count() -> None:
        real_freeze()
        frozen.append(gc.get_freeze_count())

    gc.unfreeze()  # what the test process froze before (375 objects on a GPU host)
    with mock.patch.object(graph_file.gc, "freeze", freeze_and_count):
        assert main(["validate", str(many_nodes_file)]) == 0
    assert capsys.readouterr().out == "ok\n"
    assert len(frozen) == 1
    assert frozen[0] > NODES  # the graph's objects, and whatever else was there
    assert gc.get_freeze_count() == 0


def test_a_command_leaves_what_the_program_froze_frozen(
    many_nodes_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # gc.unfreeze() thaws every frozen object: a program that froze its own keeps them
    # frozen, and the command freezes nothing of its own.
    gc.freeze()
    before = gc.get_freeze_count()
    try:
        assert main(["validate", str(many_nodes_file)]) == 0
        assert capsys.readouterr().out == "ok\n"
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()
