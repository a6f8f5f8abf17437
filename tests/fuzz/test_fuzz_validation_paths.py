"""Validation's one pass (gpulab.graph.in_order, for graphs of millions of nodes) and its
step-by-step passes agree on every graph: the same model, or the same problems in the same
order, whether the one pass takes every node, stops half way, or takes none."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any
from unittest import mock

from gpulab.graph import GraphInvalid, validate
from gpulab.graph.in_order import Taken
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.graphs import mutated, valid_graphs
from tests.fuzz.harness import fuzz_settings


def outcome(graph: Any, folder: Path, consume: bool) -> tuple[Any, ...]:
    try:
        model = validate(copy.deepcopy(graph), folder, consume=consume)
    except GraphInvalid as invalid:
        return ("invalid", [str(p) for p in invalid.errors], [str(p) for p in invalid.warnings])
    nodes = [(node, dict(node.inputs), dict(node.params)) for node in model.nodes.values()]
    return ("valid", nodes, model.inputs, model.outputs, [str(p) for p in model.warnings])


def step_by_step(raw_nodes: Any, *args: Any) -> Taken:
    return Taken({}, 0, set())  # the one pass takes no node


@fuzz_settings(400)
@given(graph=st.sampled_from([1, 3, 4]).flatmap(lambda n: mutated(valid_graphs(n))))
def test_the_one_pass_and_the_step_by_step_passes_agree(graph_dir: Path, graph: Any) -> None:
    one_pass = outcome(graph, graph_dir, consume=True)
    with mock.patch("gpulab.graph.validate.nodes_in_file_order", step_by_step):
        assert outcome(graph, graph_dir, consume=False) == one_pass
