"""Fixtures of the fuzz suite: a folder holding the graph file and the .npy files it may name."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulab.vk import Instance

from tests.fuzz.graphs import FILE_N, write_npy_files
from tests.vulkan_fixtures import no_leaked_handles, process_instance

__all__ = ["graph_dir", "no_leaked_handles", "process_instance"]


@pytest.fixture(scope="session")
def graph_dir(tmp_path_factory: pytest.TempPathFactory, process_instance: Instance) -> Path:
    folder = tmp_path_factory.mktemp("fuzz") / "graphs"
    folder.mkdir()
    write_npy_files(folder, FILE_N)
    return folder
