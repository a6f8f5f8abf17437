"""Scheduling: Kahn's order with the file order as tie-break, fan-out, and release points."""

from __future__ import annotations

from typing import Any

from gpulab.graph import load_graph, schedule
from gpulab.graph.schedule import find_cycles, topological_order


def _graph(nodes: list[dict[str, Any]], outputs: list[str]) -> dict[str, Any]:
    return {
        "version": 1,
        "inputs": {"x": {"type": "vector", "fill": {"n": 4, "value": 1.0}}},
        "nodes": nodes,
        "outputs": outputs,
    }


def _scale(node_id: str, source: str) -> dict[str, Any]:
    return {"id": node_id, "op": "scale", "inputs": {"x": source, "a": 2.0}}


def test_ready_nodes_run_in_file_order() -> None:
    # c is declared first but needs b; a and b are ready at once and keep their file order.
    graph = load_graph(
        _graph(
            [
                {"id": "c", "op": "add", "inputs": {"x": "a", "y": "b"}},
                _scale("b", "x"),
                _scale("a", "x"),
            ],
            ["c"],
        )
    )
    assert schedule(graph).order == ("b", "a", "c")


def test_fan_out_value_is_released_after_its_last_reader() -> None:
    graph = load_graph(
        _graph(
            [
                _scale("root", "x"),
                _scale("left", "root"),
                _scale("right", "root"),
                {"id": "join", "op": "add", "inputs": {"x": "left", "y": "right"}},
            ],
            ["join"],
        )
    )
    plan = schedule(graph)
    assert plan.order == ("root", "left", "right", "join")
    assert plan.releases == {
        "root": ("x",),
        "left": (),
        "right": ("root",),
        "join": ("left", "right"),
    }


def test_outputs_are_never_released() -> None:
    plan = schedule(load_graph(_graph([_scale("a", "x"), _scale("b", "a")], ["a", "b"])))
    assert plan.releases == {"a": ("x",), "b": ()}


def test_order_is_deterministic_and_cycles_are_found() -> None:
    dependencies = {"p": ["q"], "q": ["p"], "r": ["p"], "s": []}
    position = {"p": 0, "q": 1, "r": 2, "s": 3}
    order, blocked = topological_order(dependencies, position)
    assert (order, blocked) == (["s"], {"p", "q", "r"})
    assert find_cycles(blocked, dependencies, position) == [["p", "q", "p"]]
