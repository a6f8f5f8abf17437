"""A sample of fuzzed graphs through the real `gpulab` command: exit codes, no traceback and
no hang end to end (interpreter start, encodings, pipes), with a timeout per case."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

from tests.fuzz.graphs import documents, mutated, valid_graphs
from tests.fuzz.harness import check_contract, fuzz_settings, subprocess_case

COMMANDS = st.sampled_from(
    [
        ("validate",),
        ("run", "--backend", "cpu"),
        ("run", "--backend", "cpu"),
        ("run", "--backend", "native"),
        ("run", "--backend", "vulkan"),
        ("run", "--memory-budget", "64"),
    ]
)


@fuzz_settings(24)
@given(
    document=documents(st.sampled_from([1, 4]).flatmap(lambda n: mutated(valid_graphs(n)))),
    command=COMMANDS,
)
def test_the_real_command(graph_dir: Path, document: bytes, command: tuple[str, ...]) -> None:
    if command[0] == "run":
        # No multi-gigabyte run (the in-process tests cap the memory, a subprocess cannot).
        assume(re.search(rb'"(n|rows|cols)": *\d{7}', document) is None)
    path = graph_dir / "process.json"
    path.write_bytes(document)
    outcome = subprocess_case([command[0], str(path), *command[1:]])
    check_contract(outcome)
