"""The payload CLI under faults an admin meets: a missing device, a full disk, a wrong path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.graph.graph_helpers import cli, small_graph, write_graph


def test_a_device_that_does_not_exist_is_exit_3_under_auto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: auto quietly ran on cpu with exit 0, though the contract says 3.
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--device", "99")
    assert (code, out) == (3, "")
    assert err.startswith("gpulab: --device 99: there is no such Vulkan device here (found: 0: ")
    assert len(err.splitlines()) == 1
