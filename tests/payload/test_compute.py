"""GpuComputePipeline: value * 2 on lavapipe, buffer reuse, chunking and input errors."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from gpulab import GpuComputePipeline
from gpulab.vk import ObjectClosedError, live_handles


@pytest.fixture
def pipeline() -> Iterator[GpuComputePipeline]:
    with GpuComputePipeline() as created:
        yield created


def _values(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1e3, 1e3, n).astype(np.float32)


@pytest.mark.parametrize("n", [1, 255, 256, 257, 2**20 + 3])
def test_doubles_every_value(pipeline: GpuComputePipeline, n: int) -> None:
    values = _values(n)
    result = pipeline.execute(values)
    assert result.dtype == np.float32
    assert result.shape == (n,)
    np.testing.assert_array_equal(result, values * 2)


def test_keeps_the_input_shape_and_leaves_the_input_alone(pipeline: GpuComputePipeline) -> None:
    values = _values(12).reshape(3, 4)
    before = values.copy()
    np.testing.assert_array_equal(pipeline.execute(values), before * 2)
    np.testing.assert_array_equal(values, before)


def test_buffers_are_reused_while_large_enough(pipeline: GpuComputePipeline) -> None:
    pipeline.execute(_values(1000))
    buffers = dict(live_handles())
    for n in (1000, 10, 999, 1000):
        values = _values(n, seed=n)
        np.testing.assert_array_equal(pipeline.execute(values), values * 2)
    assert live_handles() == buffers
    values = _values(5000)
    np.testing.assert_array_equal(pipeline.execute(values), values * 2)
    assert live_handles() == buffers  # regrown: the old buffers were released


def test_inputs_beyond_one_binding_run_in_chunks() -> None:
    # 1 KiB bindings: 256 floats per chunk, so 10_007 values need 40 chunks.
    with GpuComputePipeline(max_binding_bytes=1024) as pipeline:
        for n in (255, 256, 257, 10_007):
            values = _values(n, seed=n)
            np.testing.assert_array_equal(pipeline.execute(values), values * 2)


def test_an_input_beyond_the_device_binding_limit(pipeline: GpuComputePipeline) -> None:
    limit = pipeline.info.max_storage_buffer_range
    if limit > 1 << 28:
        pytest.skip(f"a {limit}-byte binding limit needs too large an input to exceed here")
    n = limit // 4 + 5  # lavapipe: 128 MiB per binding, so two chunks
    values = np.arange(n, dtype=np.float32)
    assert np.array_equal(pipeline.execute(values), values * 2)


def test_empty_input_is_refused(pipeline: GpuComputePipeline) -> None:
    with pytest.raises(ValueError, match="empty"):
        pipeline.execute(np.array([], dtype=np.float32))


@pytest.mark.parametrize("values", [np.arange(4, dtype=np.float64), np.arange(4)])
def test_wrong_dtype_is_refused(pipeline: GpuComputePipeline, values: np.ndarray) -> None:
    with pytest.raises(TypeError, match="float32"):
        pipeline.execute(values)


def test_non_arrays_are_refused(pipeline: GpuComputePipeline) -> None:
    with pytest.raises(TypeError, match="list"):
        pipeline.execute([1.0, 2.0])  # type: ignore[arg-type]


def test_execute_after_close_raises() -> None:
    pipeline = GpuComputePipeline()
    pipeline.close()
    pipeline.close()
    with pytest.raises(ObjectClosedError, match="Device"):
        pipeline.execute(_values(4))
