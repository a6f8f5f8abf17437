"""Fusion: the plan (gpulab.graph.fusion, pure graph analysis) and, on Vulkan, fused runs
against `--no-fuse` runs and the cpu backend, on random graphs (the fuzz suite's generator,
and chains biased towards what fuses). Under GPULAB_VK_VALIDATION=1 every run here is watched
by the validation layer (the fused shaders' barriers included)."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab import Runner, load_graph
from gpulab.backends import vulkan as vulkan_backend
from gpulab.graph import Graph, Literal
from gpulab.graph.fusion import plan
from gpulab.kernels import fused as fused_shaders
from gpulab.ops import NumericalError, reference, tolerance
from gpulab.ops.user_kernel import compiles_many
from graph_helpers import has_vulkan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.graphs import valid_graphs

N = 1003
"""Vector length of the hand-made graphs: vec4 loops and a 3-element tail."""


def _graph(nodes: list[dict[str, Any]], outputs: list[str], n: int = N) -> dict[str, Any]:
    return {
        "version": 1,
        "name": "fusion",
        "inputs": {
            "x": {"type": "vector", "random": {"n": n, "seed": 1, "low": -1, "high": 1}},
            "y": {"type": "vector", "random": {"n": n, "seed": 2, "low": -1, "high": 1}},
            "a": {"type": "scalar", "value": 1.5},
            "M": {"type": "matrix", "random": {"rows": n, "cols": n, "seed": 3}},
        },
        "nodes": nodes,
        "outputs": outputs,
    }


def _node(node_id: str, op: str, **inputs: Any) -> dict[str, Any]:
    return {"id": node_id, "op": op, "inputs": inputs}


def _plan(document: dict[str, Any], kept: tuple[str, ...] = ()) -> list[tuple[list[str], set[str]]]:
    graph = load_graph(document)
    nodes = tuple(graph.nodes.values())
    return [(list(group.ids), set(group.written)) for group in plan(nodes, (*graph.outputs, *kept))]


# --- the plan ------------------------------------------------------------------------------


def test_a_chain_and_the_reduction_it_feeds_are_one_group() -> None:
    document = _graph(
        [
            _node("s", "saxpy", a="a", x="x", y="y"),
            _node("t", "scale", x="s", a=2.0),
            _node("n", "l2_norm", x="t"),
        ],
        ["n"],
    )
    assert _plan(document) == [(["s", "t", "n"], {"n"})]


def test_a_member_read_elsewhere_or_an_output_is_written() -> None:
    document = _graph(
        [
            _node("s", "add", x="x", y="y"),
            _node("t", "scale", x="s", a=2.0),
            _node("n", "sum", x="t"),
            _node("m", "matvec", A="M", x="s"),
        ],
        ["n", "m", "t"],
    )
    assert _plan(document) == [(["s", "t", "n"], {"s", "t", "n"})]


def test_a_producer_read_before_the_anchor_stays_out() -> None:
    # m reads s before n runs: s cannot wait for n's dispatch.
    document = _graph(
        [
            _node("s", "add", x="x", y="y"),
            _node("m", "matvec", A="M", x="s"),
            _node("t", "add", x="s", y="m"),
        ],
        ["t"],
    )
    assert _plan(document) == []


def test_reductions_only_anchor_and_ops_without_fusion_never_fuse() -> None:
    document = _graph(
        [
            _node("n", "sum", x="x"),
            _node("s", "scale", x="y", a="n"),
            _node("m", "matvec", A="M", x="s"),
            _node("k", "add", x="m", y="y"),
            _node("d", "dot", x="k", y="s"),
        ],
        ["d"],
    )
    # n's scalar is read by s, not fused into it; m (matvec) has no fused form, and reads s
    # before d runs, so s stays out of d's group.
    assert _plan(document) == [(["k", "d"], {"d"})]


def test_normalize_fuses_into_its_consumer_but_reads_its_input_from_memory() -> None:
    document = _graph(
        [
            _node("s", "saxpy", a="a", x="x", y="y"),
            _node("norm", "l2_norm", x="s"),
            _node("u", "normalize", x="s"),
            _node("total", "sum", x="u"),
        ],
        ["norm", "total"],
    )
    # u's norm is a pass over s before u's group: s is written, by its own group.
    assert _plan(document) == [(["s", "norm"], {"s", "norm"}), (["u", "total"], {"total"})]


TWO_REDUCTIONS = [
    _node("s", "saxpy", a="a", x="x", y="y"),
    _node("t", "scale", x="s", a=-0.5),
    _node("d", "dot", x="t", y="y"),
    _node("total", "sum", x="t"),
    _node("low", "min", x="t"),
    _node("n", "l2_norm", x="t"),
]


def test_reductions_of_one_chain_join_its_group() -> None:
    # d, total and low read t before n runs: they wait for n, so s and t are read once.
    document = _graph(TWO_REDUCTIONS, ["d", "total", "low", "n"])
    groups = _plan(document)
    assert groups == [(["s", "t", "d", "total", "low", "n"], {"d", "total", "low", "n"})]


def test_no_member_reads_a_reduction_of_its_own_group() -> None:
    document = _graph(
        [
            _node("s", "add", x="x", y="y"),
            _node("m", "max", x="s"),
            _node("t", "scale", x="s", a="m"),
            _node("n", "sum", x="t"),
        ],
        ["n"],
    )
    for ids, _ in _plan(document):
        assert not {"m", "t"} <= set(ids), ids


def test_groups_stay_within_the_binding_budget() -> None:
    nodes = [_node("v0", "add", x="x", y="y")]
    for index in range(1, 12):
        nodes.append(_node(f"v{index}", "add", x=f"v{index - 1}", y="x" if index % 2 else "y"))
    document = _graph(nodes, [f"v{index}" for index in range(12)])
    for ids, written in _plan(document):
        assert len(written) + 2 <= 8, ids


# --- fused runs ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runners() -> Iterator[tuple[Runner, Runner, Runner]]:
    if not has_vulkan():
        pytest.skip("no Vulkan device")
    with (
        Runner("vulkan") as fused,
        Runner("vulkan", fuse=False) as unfused,
        Runner("cpu") as cpu,
    ):
        yield fused, unfused, cpu


def _every_node(document: dict[str, Any]) -> Graph:
    return load_graph(dict(document, outputs=[node["id"] for node in document["nodes"]]))


def _run(runner: Runner, graph: Graph) -> Any:
    try:
        return runner.run(graph)
    except NumericalError:
        return None


def _close(got: Any, want: Any, name: str, scale: float) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, name
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale, err_msg=name)


def compare(runners: tuple[Runner, Runner, Runner], document: dict[str, Any]) -> None:
    """Fused == --no-fuse (closely: the same float32 steps, at most contracted differently)
    on the sinks and on every node; every fused node within its op's tolerance of the
    reference on its own inputs, where the cpu run succeeds too."""
    fused_runner, unfused_runner, cpu_runner = runners
    for graph in (load_graph(document), _every_node(document)):
        fused = _run(fused_runner, graph)
        unfused = _run(unfused_runner, graph)
        cpu = _run(cpu_runner, graph)
        assert (fused is None) == (unfused is None), document
        if fused is None or unfused is None:
            continue
        assert fused.dispatches is not None and unfused.dispatches is not None
        assert fused.dispatches <= unfused.dispatches
        in_groups = sum(len(group) for group in fused.fused)
        assert fused.dispatches <= unfused.dispatches - in_groups + len(fused.fused)
        scale = 1.0 + max(
            (float(np.max(np.abs(v))) for v in unfused.outputs.values() if np.size(v)),
            default=0.0,
        )
        for name, value in unfused.outputs.items():
            _close(fused.outputs[name], value, name, scale if np.isfinite(scale) else 1.0)
        if set(graph.outputs) != set(graph.nodes) or cpu is None:
            continue
        values: dict[str, Any] = dict(fused.outputs)
        values.update(cpu_inputs(cpu_runner, graph))
        for node_id, node in graph.nodes.items():
            if node_id not in in_any_group(fused.fused):
                continue  # run as without fusion: the other property tests check it
            inputs = {
                name: (arg.value if isinstance(arg, Literal) else values[arg.name])
                for name, arg in node.inputs.items()
            }
            ref = reference.evaluate(node.op, inputs, node.params)
            outcome = tolerance.compare(node.op, values[node_id], ref, inputs, node.params)
            assert outcome.ok, (node_id, node.op, outcome, document)


def in_any_group(groups: list[list[str]]) -> set[str]:
    return {node_id for group in groups for node_id in group}


def cpu_inputs(cpu: Runner, graph: Graph) -> dict[str, Any]:
    """The graph's inputs as the host makes them (the device makes them bit for bit alike)."""
    from gpulab.graph import materialize  # noqa: PLC0415

    return {name: materialize(spec) for name, spec in graph.inputs.items()}


FUSABLE = ("add", "scale", "saxpy", "sum", "min", "max", "dot", "l2_norm")
"""The elementwise ops, then the reductions (normalize fuses too, as an elementwise op whose
norm is a pass of its own)."""


@st.composite
def chains(draw: st.DrawFn) -> dict[str, Any]:
    """DAGs mostly of fusable ops (some normalize and matvec between them)."""
    n = draw(st.integers(1, 70))
    vectors, scalars = ["x", "y"], ["a"]
    nodes: list[dict[str, Any]] = []
    for index in range(draw(st.integers(2, 9))):
        op = draw(st.sampled_from((*FUSABLE, *FUSABLE[:3], "normalize", "matvec")))
        node_id = f"n{index}"
        recent = st.sampled_from(vectors[-3:] + vectors[:2])
        inputs: dict[str, Any] = {}
        if op in ("add", "dot", "saxpy"):
            inputs["x"], inputs["y"] = draw(recent), draw(recent)
        elif op == "matvec":
            inputs["A"], inputs["x"] = "M", draw(recent)
        else:
            inputs["x"] = draw(recent)
        if op in ("scale", "saxpy"):
            inputs["a"] = draw(st.one_of(st.sampled_from(scalars), st.floats(-2, 2, width=32)))
        nodes.append({"id": node_id, "op": op, "inputs": inputs})
        (scalars if op in FUSABLE[3:] else vectors).append(node_id)
    read = {value for node in nodes for value in node["inputs"].values()}
    sinks = [node["id"] for node in nodes if node["id"] not in read]
    return _graph(nodes, sinks, n)


_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.large_base_example,
    ],
)


@settings(_SETTINGS, max_examples=60)
@given(document=chains())
def test_fused_chains_equal_unfused_and_cpu(
    runners: tuple[Runner, Runner, Runner], document: dict[str, Any]
) -> None:
    compare(runners, document)


@_SETTINGS
@given(document=valid_graphs(13))
def test_fuzz_graphs_fused_equal_unfused_and_cpu(
    runners: tuple[Runner, Runner, Runner], document: dict[str, Any]
) -> None:
    compare(runners, document)


def test_the_chain_fuses_and_matches(runners: tuple[Runner, Runner, Runner]) -> None:
    document = _graph(
        [
            _node("s", "saxpy", a="a", x="x", y="y"),
            _node("t", "scale", x="s", a=-0.5),
            _node("u", "add", x="t", y="x"),
            _node("n", "l2_norm", x="u"),
            _node("m", "max", x="t"),
        ],
        ["n", "m", "s"],
    )
    fused = runners[0].run(load_graph(document))
    assert fused.fused == [["s", "t", "u", "n"]]
    compare(runners, document)


FOUR_NODES = [
    _node("s", "saxpy", a="a", x="x", y="y"),
    _node("norm", "l2_norm", x="s"),
    _node("u", "normalize", x="s"),
    _node("total", "sum", x="u"),
]
"""payload/benchmarks/end_to_end.py's graph: s is written (normalize reads it), u is not."""


def _small_matrix(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with a 1 x 1 M (these graphs never read it: a long n makes it no larger)."""
    document["inputs"]["M"] = {"type": "matrix", "fill": {"rows": 1, "cols": 1, "value": 1}}
    return document


def _peak_vectors(document: dict[str, Any], n: int, fuse: bool) -> tuple[float, Any]:
    """The device-local memory a fresh run held at its peak, in vectors of n floats (the
    staging and readback rings, in host memory on a discrete GPU, left out); its result."""
    with Runner("vulkan", fuse=fuse) as runner:
        result = runner.run(load_graph(document))
        stats = runner.executor("vulkan").memory_stats()
        assert stats is not None
        peak = sum(
            kind["peak_in_use_bytes"]
            for kind in stats["memory_types"].values()
            if "device_local" in kind["flags"]
        )
        return peak / (4 * n), result


def test_a_fused_result_takes_the_memory_of_an_input_no_later_node_reads(
    runners: tuple[Runner, Runner, Runner],
) -> None:
    """s = saxpy(a, x, y) is written in place of x (the group loads each element of x and y
    before it stores s's): x and y held, no third vector; unfused too (elementwise.comp reads
    element i before it writes it), u then over s. And where a later node reads x, s takes
    y's memory instead."""
    n = 1 << 14
    document = _small_matrix(_graph(FOUR_NODES, ["norm", "total"], n))
    fused_peak, fused = _peak_vectors(document, n, fuse=True)
    unfused_peak, unfused = _peak_vectors(document, n, fuse=False)
    assert fused.fused == [["s", "norm"], ["u", "total"]]
    assert 2 <= fused_peak < 2.1 and 2 <= unfused_peak < 2.1
    for name in ("norm", "total"):
        _close(fused.outputs[name], unfused.outputs[name], name, 1.0)
    compare(runners, document)
    # x an output too: made on the device and read back after the run, so never written over.
    shown = _small_matrix(_graph(FOUR_NODES, ["x", "norm", "total"], n))
    shown_peak, with_x = _peak_vectors(shown, n, fuse=True)
    assert 2 <= shown_peak < 2.1  # s takes y's memory instead
    assert np.array_equal(with_x.outputs["x"], cpu_inputs(runners[2], load_graph(shown))["x"])
    late = [*FOUR_NODES, _node("late", "dot", x="x", y="u")]
    later = _small_matrix(_graph(late, ["norm", "total", "late"], n))
    later_peak, _ = _peak_vectors(later, n, fuse=True)
    assert 2 <= later_peak < 2.1
    compare(runners, later)


def test_unfused_elementwise_nodes_chain_in_place_and_other_ops_never_do(
    runners: tuple[Runner, Runner, Runner],
) -> None:
    """--no-fuse: s over x, t over s, u over t (a chain of elementwise nodes, each the last
    reader of its input), the vectors held: x's memory and y; a node that reads x later keeps
    x whole (s takes y's memory then). matvec, which reads all of x for each element, never
    writes over x. Every value equals the cpu backend's."""
    n = 1 << 14
    chain = [
        _node("s", "saxpy", a="a", x="x", y="y"),
        _node("t", "scale", x="s", a=-0.5),
        _node("u", "normalize", x="t"),
        _node("total", "sum", x="u"),
    ]
    cpu = runners[2]
    for nodes, vectors in (
        (chain, 2),
        ([*chain, _node("late", "dot", x="x", y="u")], 2),
    ):
        document = _small_matrix(_graph(nodes, ["total", *(["late"] if len(nodes) > 4 else [])], n))
        peak, unfused = _peak_vectors(document, n, fuse=False)
        assert vectors <= peak < vectors + 0.1, (nodes[-1]["id"], peak)
        want = cpu.run(load_graph(document)).outputs
        for name, value in want.items():
            _close(unfused.outputs[name], value, name, 1.0)
    small = 64  # matvec over an n x n matrix: a small n
    document = _graph(
        [_node("v", "matvec", A="M", x="x"), _node("total", "sum", x="v")], ["total"], small
    )
    with Runner("vulkan", fuse=False) as runner:
        got = runner.run(load_graph(document)).outputs["total"]
    _close(got, cpu.run(load_graph(document)).outputs["total"], "total", float(small))


def test_new_fused_shaders_compile_in_one_process_on_the_same_memory(
    runners: tuple[Runner, Runner, Runner],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    compiler_calls: list[list[str]],
) -> None:
    """A fresh cache: the four-node graph's two generated shaders come from one glslc
    process (a first pass gathers them, the second records on the buffers the first gave
    back: the same peak, the same dispatches), and the run equals --no-fuse; a new process
    (the disk cache only) compiles nothing and records once."""
    if not compiles_many():
        pytest.skip("glslc is not on PATH")
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(fused_shaders, "_compiled", OrderedDict())
    calls = compiler_calls
    passes: list[object] = []
    record = vulkan_backend._Recording._record

    def counted(self: Any) -> None:
        passes.append(self)
        record(self)

    monkeypatch.setattr(vulkan_backend._Recording, "_record", counted)
    n = 1 << 12
    document = _small_matrix(_graph(FOUR_NODES, ["norm", "total"], n))
    cold_peak, cold = _peak_vectors(document, n, fuse=True)
    assert cold.fused == [["s", "norm"], ["u", "total"]]
    assert len(calls) == 1 and len(passes) == 2
    assert "-c" in calls[0] and len([a for a in calls[0] if a.endswith(".comp")]) == 2
    unfused = runners[1].run(load_graph(document))
    for name in ("norm", "total"):
        _close(cold.outputs[name], unfused.outputs[name], name, 1.0)
    monkeypatch.setattr(fused_shaders, "_compiled", OrderedDict())
    passes.clear()
    warm_peak, warm = _peak_vectors(document, n, fuse=True)
    assert len(calls) == 1 and len(passes) == 1
    assert (warm_peak, warm.dispatches) == (cold_peak, cold.dispatches)
    assert {k: float(v) for k, v in warm.outputs.items()} == {
        k: float(v) for k, v in cold.outputs.items()
    }


def test_several_reductions_in_one_pass_match(runners: tuple[Runner, Runner, Runner]) -> None:
    for n in (1, 5, N, 70_001):
        document = _graph(TWO_REDUCTIONS, ["d", "total", "low", "n"], n)
        document["inputs"]["M"] = {"type": "matrix", "fill": {"rows": 1, "cols": 1, "value": 1}}
        fused = runners[0].run(load_graph(document))
        assert fused.fused == [["s", "t", "d", "total", "low", "n"]]
        compare(runners, document)


def test_a_zero_norm_in_a_fused_normalize_is_still_a_numerical_error(
    runners: tuple[Runner, Runner, Runner],
) -> None:
    document = _graph(
        [
            _node("z", "scale", x="x", a=0.0),
            _node("u", "normalize", x="z"),
            _node("t", "sum", x="u"),
        ],
        ["t"],
    )
    assert _plan(document) == [(["u", "t"], {"t"})]
    for runner in runners:
        with pytest.raises(NumericalError, match="norm 0"):
            runner.run(load_graph(document))


def test_normalize_reuses_an_l2_norm_of_its_input(runners: tuple[Runner, Runner, Runner]) -> None:
    nodes = [
        _node("s", "saxpy", a="a", x="x", y="y"),
        _node("n", "l2_norm", x="s"),
        _node("u", "normalize", x="s"),
        _node("t", "sum", x="u"),
    ]
    graph = load_graph(_graph(nodes, ["t"]))
    groups = plan(tuple(graph.nodes.values()), graph.outputs)
    assert [(g.ids, g.reused) for g in groups] == [
        (("s", "n"), ()),
        (("u", "t"), (("u", "norm", "n"),)),
    ]
    compare(runners, _graph(nodes, ["t"]))
    fused = runners[0].run(graph)
    unfused = runners[1].run(graph)
    assert fused.dispatches is not None and unfused.dispatches is not None
    assert fused.dispatches < unfused.dispatches - 2  # no second norm, no division pass
    # n is read after the run (as u's norm), so a zero norm is still found.
    zero = _graph(
        [
            _node("z", "scale", x="x", a=0.0),
            _node("n", "l2_norm", x="z"),
            _node("u", "normalize", x="z"),
            _node("t", "sum", x="u"),
        ],
        ["t"],
    )
    for runner in runners:
        with pytest.raises(NumericalError, match="norm 0"):
            runner.run(load_graph(zero))


def test_gpulab_run_no_fuse(tmp_path: Path) -> None:
    if not has_vulkan():
        pytest.skip("no Vulkan device")
    from tests.payload.test_cli import gpulab  # noqa: PLC0415 - the CLI suite's runner

    graph = tmp_path / "chain.json"
    graph.write_text(json.dumps(_graph(TWO_REDUCTIONS, ["d", "n"])))
    results = {}
    for flags in ((), ("--no-fuse",)):
        done = gpulab("run", str(graph), "--backend", "vulkan", *flags)
        assert done.returncode == 0, done.stderr
        results[flags] = json.loads(done.stdout)
    fused, unfused = results[()], results[("--no-fuse",)]
    assert fused["fusion"] == "on" and fused["fused"] == [["s", "t", "d", "total", "low", "n"]]
    assert unfused["fusion"] == "off (--no-fuse)" and unfused["fused"] == []
    assert fused["timing"]["dispatches"] < unfused["timing"]["dispatches"]
    for name in ("d", "n"):
        want = unfused["outputs"][name]["value"]
        assert abs(fused["outputs"][name]["value"] - want) <= 1e-5 * (1 + abs(want))


def test_without_a_compiler_fusion_is_off_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not has_vulkan():
        pytest.skip("no Vulkan device")
    monkeypatch.setenv("PATH", str(tmp_path))
    document = _graph([_node("s", "add", x="x", y="y"), _node("n", "sum", x="s")], ["n"])
    with Runner("vulkan") as runner:
        result = runner.run(load_graph(document))
    assert result.fused == []
    assert result.fusion is not None and result.fusion.startswith("off: no GLSL compiler")
    assert result.to_json()["fusion"] == result.fusion
