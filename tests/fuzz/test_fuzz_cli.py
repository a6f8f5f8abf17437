"""`gpulab validate`, `run` and `submit` on thousands of malformed and adversarial graphs.

Every case must end with a contract exit code, no traceback and one `gpulab:` line per
problem; `validate` and `run` must agree on what is invalid; nothing may hang. The counts
are CI's; GPULAB_FUZZ_EXAMPLES=N scales every test to N/1000 times as many (tests/fuzz/README).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from gpulab.vk import live_handles
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.graphs import documents, mutated, valid_graphs
from tests.fuzz.harness import (
    Outcome,
    check_contract,
    fuzz_settings,
    in_process,
    result_of,
)

SIZES = st.sampled_from([1, 3, 4])


def _graphs(node_backends: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    return SIZES.flatmap(lambda n: mutated(valid_graphs(n, node_backends)))


def _write(folder: Path, document: bytes) -> str:
    path = folder / "graph.json"
    path.write_bytes(document)
    return str(path)


def _check_run(validated: Outcome, ran: Outcome, graph_text: bytes) -> None:
    check_contract(ran)
    event(f"validate exit {validated.code}, run exit {ran.code}")  # --hypothesis-show-statistics
    detail = f"{validated.describe()}\n{ran.describe()}\ngraph: {graph_text[:3000]!r}"
    if validated.code == 2:
        assert ran.code == 2, detail
        # The same problems (validated the same way; the run's memory limit is lower).
        said, reported = _problems(validated.err), _problems(ran.err)
        assert said <= reported, detail
        assert all(line.endswith(_MEMORY) for line in reported - said), detail
    elif ran.code == 2:
        # Valid, but larger than the memory a run may hold now (capped in this suite).
        assert validated.code == 0, detail
        assert "of available memory (capped by the fuzz suite) exist" in ran.err, detail
    else:
        assert validated.code == 0, detail
        # A valid graph runs, or fails with a runtime reason (normalize of a zero vector).
        assert ran.code in (0, 4), detail
    if ran.code == 0:
        assert set(result_of(ran)["outputs"]) == set(_outputs(graph_text)), detail


_MEMORY = "<memory limit>"


def _problems(err: str) -> set[str]:
    """The lines of `err` with the memory limit named in size problems replaced."""
    return {re.sub(r", only [^,]* exist$", _MEMORY, line) for line in err.splitlines()}


def _outputs(graph_text: bytes) -> list[str]:
    outputs: list[str] = json.loads(graph_text)["outputs"]
    return outputs


@fuzz_settings(1500)
@given(document=documents(_graphs(("cpu", "native"))))
def test_validate_and_run_on_cpu(graph_dir: Path, document: bytes) -> None:
    path = _write(graph_dir, document)
    validated = in_process(["validate", path])
    check_contract(validated)
    assert validated.code in (0, 2), validated.describe()
    if validated.code == 0:
        assert validated.out == "ok\n", validated.describe()
    _check_run(validated, in_process(["run", path, "--backend", "cpu"]), document)


@fuzz_settings(1000)
@given(document=documents(_graphs()))
def test_validate_only(graph_dir: Path, document: bytes) -> None:
    validated = in_process(["validate", _write(graph_dir, document)])
    check_contract(validated)
    assert validated.code in (0, 2), validated.describe()


@fuzz_settings(1000)
@given(document=st.binary(max_size=200))
def test_validate_arbitrary_bytes(graph_dir: Path, document: bytes) -> None:
    validated = in_process(["validate", _write(graph_dir, document)])
    check_contract(validated)
    assert validated.code == 2, validated.describe()


@fuzz_settings(250)
@given(document=documents(_graphs(("cpu",))))
def test_run_on_native(graph_dir: Path, document: bytes) -> None:
    path = _write(graph_dir, document)
    validated = in_process(["validate", path])
    _check_run(validated, in_process(["run", path, "--backend", "native"]), document)


@fuzz_settings(120)
@given(document=documents(_graphs(("cpu", "native"))))
def test_run_on_vulkan_leaks_nothing(graph_dir: Path, document: bytes) -> None:
    before = live_handles()
    path = _write(graph_dir, document)
    validated = in_process(["validate", path])
    _check_run(validated, in_process(["run", path, "--backend", "vulkan"]), document)
    assert live_handles() == before


@fuzz_settings(40)
@given(document=documents(_graphs(("vulkan",))))
def test_run_auto_with_vulkan_nodes(graph_dir: Path, document: bytes) -> None:
    before = live_handles()
    path = _write(graph_dir, document)
    validated = in_process(["validate", path])
    _check_run(validated, in_process(["run", path]), document)
    assert live_handles() == before


@pytest.mark.skipif(shutil.which("sbatch") is not None, reason="sbatch here would really submit")
@fuzz_settings(300)
@given(document=documents(_graphs()))
def test_submit_checks_the_graph_before_slurm(graph_dir: Path, document: bytes) -> None:
    path = _write(graph_dir, document)
    validated = in_process(["validate", path])
    submitted = in_process(["submit", path, "--shared-dir", str(graph_dir / "jobs")])
    check_contract(submitted)
    # Invalid: exit 2 with validate's lines; valid: exit 3, as there is no sbatch here.
    if validated.code == 2:
        assert (submitted.code, submitted.err) == (2, validated.err), submitted.describe()
    else:
        assert submitted.code == 3, submitted.describe()


@fuzz_settings(80)
@given(
    document=documents(_graphs(("cpu",))),
    backend=st.sampled_from(["auto", "vulkan"]),
    budget=st.sampled_from(["16", "64", "256", "4K", "1M"]),
)
def test_run_under_a_tiny_memory_budget(
    graph_dir: Path, document: bytes, backend: str, budget: str
) -> None:
    """Device memory runs out at any point: exit 4 on vulkan, a reported cpu run under auto;
    never a leaked Vulkan object."""
    before = live_handles()
    path = _write(graph_dir, document)
    validated = in_process(["validate", path])
    ran = in_process(["run", path, "--backend", backend, "--memory-budget", budget])
    _check_run(validated, ran, document)
    if ran.code == 0 and backend == "auto":
        result = result_of(ran)
        assert ("fallback" in result) == (result["backend"] == "cpu"), ran.describe()
        if "fallback" in result:
            assert "ran on cpu instead of vulkan: " in ran.err, ran.describe()
    assert live_handles() == before


ARGUMENTS = st.one_of(
    st.sampled_from(
        [
            "--backend",
            "vulkan",
            "cpu",
            "gpu",
            "--device",
            "-1",
            "7",
            "99999999999999999999",
            "--memory-budget",
            "0",
            "1M",
            "-5",
            "--output",
            "/nonexistent/dir/out.json",
            "--compare",
            "native",
            "--full",
            "--",
            "-",
            "",
        ]
    ),
    st.text(max_size=8),
)


@fuzz_settings(400)
@given(
    command=st.sampled_from(["run", "validate", "submit", "schema", "bogus"]),
    arguments=st.lists(ARGUMENTS, max_size=6),
)
def test_command_lines(graph_dir: Path, command: str, arguments: list[str]) -> None:
    """Flags in any order and with any value: argparse's exit 2 or a contract code."""
    path = _write(
        graph_dir,
        b'{"version": 1, "nodes": [{"id": "s", "op": "sum", '
        b'"inputs": {"x": "x"}}], "inputs": {"x": {"type": "vector", '
        b'"data": [1, 2]}}, "outputs": ["s"]}',
    )
    argv = [command, path, *arguments]
    if command == "submit":
        argv += ["--shared-dir", str(graph_dir / "jobs")]
    outcome = in_process(argv)
    check_contract(outcome)
