"""Each device's pipeline cache kept between processes (kernels/saved_pipelines.py): written
when pipelines were made, read back by the next catalog, ignored when damaged, never in the
way where it cannot be written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gpulab.kernels.saved_pipelines
import numpy as np
import pytest
from gpulab import Runner, load_graph
from gpulab._cache import CACHE_DIR_ENV
from gpulab.kernels import Kernels
from gpulab.kernels.saved_pipelines import MAGIC, cache_file, load, save
from gpulab.vk import Device


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def add_once(device: Device) -> None:
    with Kernels(device) as kernels:
        x = np.arange(10, dtype=np.float32)
        assert np.array_equal(kernels.run("add", x=x, y=x), 2 * x)


def test_a_catalog_saves_what_it_made_and_the_next_one_starts_from_it(
    device: Device, cache: Path
) -> None:
    path = cache_file(device.info)
    assert path is not None and path.parent == cache / "pipelines"
    assert not path.exists()
    add_once(device)
    saved = path.read_bytes()
    assert saved.startswith(MAGIC)
    data = load(device.info)
    assert data and saved.endswith(data)
    with Kernels(device) as kernels:
        assert kernels.catalog._cache.data()[:16] == data[:16]  # seeded: the driver's header
    add_once(device)  # made again from the seed: the file is rewritten whole
    assert load(device.info)


@pytest.mark.parametrize(
    "damage",
    [
        lambda content: content[: len(content) - 5],  # cut short
        lambda content: content[:-1] + bytes([content[-1] ^ 1]),  # a flipped bit
        lambda content: b"not a cache at all",
        lambda content: b"",
    ],
)
def test_a_damaged_file_is_ignored_then_replaced(device: Device, damage: object) -> None:
    add_once(device)
    path = cache_file(device.info)
    assert path is not None
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    assert load(device.info) == b""
    add_once(device)  # runs as on a first use, and saves a whole file again
    assert load(device.info)


def test_too_large_a_file_is_not_read(device: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    add_once(device)
    monkeypatch.setattr(gpulab.kernels.saved_pipelines, "MAX_BYTES", 8)
    assert load(device.info) == b""
    assert not save(device.info, b"0123456789")


def test_a_cache_that_cannot_be_written_is_no_error(
    device: Device, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("a file where the folder should be")
    add_once(device)
    assert not save(device.info, b"data")
    assert load(device.info) == b""
    assert cache.read_text() == "a file where the folder should be"


def test_each_pipeline_cache_uuid_has_its_own_file(device: Device) -> None:
    other = dataclasses.replace(device.info, pipeline_cache_uuid="ab" * 16)
    assert cache_file(other) != cache_file(device.info)
    assert cache_file(dataclasses.replace(device.info, pipeline_cache_uuid="0" * 32)) is None
    assert save(other, b"someone else's") and load(other) == b"someone else's"
    assert load(device.info) == b""


def test_a_run_keeps_its_pipelines_before_the_process_ends(tmp_path: Path, device: Device) -> None:
    """gpulab run ends in os._exit, closing nothing: the backend saves after the run."""
    graph = {
        "version": 1,
        "inputs": {"x": {"type": "vector", "data": [1.0, 2.0, 3.0]}},
        "nodes": [{"id": "s", "op": "scale", "inputs": {"x": "x", "a": 2.0}}],
        "outputs": ["s"],
    }
    (tmp_path / "g.json").write_text(json.dumps(graph))
    runner = Runner("vulkan")
    try:
        runner.run(load_graph(tmp_path / "g.json"))
        assert load(device.info)
    finally:
        runner.close()
