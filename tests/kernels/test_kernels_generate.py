"""Inputs generated on the device are bit for bit what gpulab.graph.values makes on the host:
numpy's default_rng(seed).uniform as float32, np.linspace as float32, np.full."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from gpulab.graph.model import Fill, GraphInput, Linspace, Random, Source
from gpulab.graph.values import materialize
from gpulab.kernels import Constant, Kernels, OwnedArray, Pattern, Ramp, Uniform
from gpulab.kernels.generate import TINY
from gpulab.kernels.pcg64 import advance, generate_state, seeded
from gpulab.ops import Kind
from gpulab.vk import CommandPool, Device, Fence
from hypothesis import given, settings
from hypothesis import strategies as st


class Generator:
    """Generates patterns on a device into mappable arrays and reads them back."""

    def __init__(self, device: Device, kernels: Kernels) -> None:
        self.device = device
        self.kernels = kernels
        self.pool = CommandPool(device)
        self.fence = Fence(device)

    def make(self, pattern: Pattern, shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
        with OwnedArray(self.device, shape) as out:
            cmd = self.pool.allocate()
            try:
                cmd.begin()
                self.kernels.generate(cmd, pattern, out.array)
                cmd.barrier("compute", "host")
                cmd.end()
                self.device.submit(cmd, self.fence)
                self.fence.wait()
                self.fence.reset()
                return out.read()
            finally:
                cmd.close()

    def close(self) -> None:
        self.fence.close()
        self.pool.close()


@pytest.fixture
def generator(device: Device, kernels: Kernels) -> Iterator[Generator]:
    made = Generator(device, kernels)
    yield made
    made.close()


@pytest.fixture
def chunked(device: Device) -> Iterator[Generator]:
    """Bindings of 1000 floats (4000 bytes rounded down to the alignment): large inputs are
    generated in several dispatches, each starting its stream part-way."""
    with Kernels(device, max_binding_bytes=4000) as kernels:
        made = Generator(device, kernels)
        yield made
        made.close()


def host_values(source: Source, shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
    kind = Kind.MATRIX if len(shape) == 2 else Kind.VECTOR
    return materialize(GraphInput("x", kind, shape, source))


def assert_bitwise(device_values: npt.NDArray[Any], host: npt.NDArray[np.float32]) -> None:
    assert device_values.shape == host.shape
    got, expected = device_values.view(np.uint32), host.view(np.uint32)
    differ = np.flatnonzero(got.reshape(-1) != expected.reshape(-1))
    assert differ.size == 0, (
        f"{differ.size} elements differ, first at {differ[0]}: "
        f"{device_values.reshape(-1)[differ[0]]!r} != {host.reshape(-1)[differ[0]]!r}"
    )


def test_advance_matches_numpy_jump_ahead() -> None:
    for seed in (0, 1, 2**40 + 3):
        state = np.random.PCG64(seed).state["state"]
        for steps in (0, 1, 2, 255, 10**6, 2**64 + 17):
            jumped = np.random.PCG64(seed).advance(steps).state["state"]
            assert advance(int(state["state"]), int(state["inc"]), steps) == jumped["state"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(0, 2**32), st.integers(0, 2**300)))
def test_seeding_matches_numpy(seed: int) -> None:
    """pcg64.seeded is np.random.PCG64(seed)'s state, seeds of one word or of many (more
    than the pool's four words mix in a second pass)."""
    numpy_state = np.random.PCG64(seed).state["state"]
    assert seeded(seed) == (int(numpy_state["state"]), int(numpy_state["inc"]))
    words = np.random.SeedSequence(seed).generate_state(6, np.uint64)
    assert generate_state(seed, 6) == [int(word) for word in words]


def test_seeding_refuses_a_negative_seed_as_numpy_does() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        seeded(-1)
    with pytest.raises(ValueError):
        np.random.PCG64(-1)


SEEDS = (0, 1, 7, 12345, 2**32 + 1, 2**63 + 11)
SIZES = (1, 2, 3, 255, 256, 257, 1000, 4097, 65_537)


@pytest.mark.parametrize("seed", SEEDS)
def test_uniform_matches_numpy_for_many_sizes_and_ranges(seed: int, generator: Generator) -> None:
    ranges = np.random.default_rng(seed).uniform(-1e4, 1e4, (len(SIZES), 2))
    for n, pair in zip(SIZES, ranges, strict=True):
        low, high = sorted(float(v) for v in pair)
        source = Random(seed, low, high)
        got = generator.make(Uniform.from_seed(seed, low, high), (n,))
        assert_bitwise(got, host_values(source, (n,)))


@pytest.mark.parametrize(
    ("low", "high"),
    [
        (0.0, 1.0),
        (-1.0, 1.0),
        (-5.0, -0.001),
        (2.5, 2.5),
        (-0.0, 0.0),
        (0.0, 1e-38),  # float32 subnormal results, which a device may not flush here
        (-3.4e38, 3.4e38),
        (1e-3, 1e6),
        (0.1, 0.3),
    ],
)
def test_uniform_matches_numpy_for_edge_ranges(
    low: float, high: float, generator: Generator
) -> None:
    got = generator.make(Uniform.from_seed(99, low, high), (10_007,))
    assert_bitwise(got, host_values(Random(99, low, high), (10_007,)))


def test_uniform_matrix_uses_the_stream_in_c_order(generator: Generator) -> None:
    got = generator.make(Uniform.from_seed(4, -2.0, 3.0), (37, 53))
    assert_bitwise(got, host_values(Random(4, -2.0, 3.0), (37, 53)))


def test_uniform_of_2_to_the_22_elements(generator: Generator) -> None:
    n = 1 << 22
    got = generator.make(Uniform.from_seed(2026, -1.0, 1.0), (n,))
    assert_bitwise(got, host_values(Random(2026, -1.0, 1.0), (n,)))


def test_chunked_bindings_continue_the_stream(chunked: Generator) -> None:
    assert chunked.kernels.elements_per_binding() <= 1000
    for shape in [(5003,), (71, 29)]:
        got = chunked.make(Uniform.from_seed(8, -1.0, 4.0), shape)
        assert_bitwise(got, host_values(Random(8, -1.0, 4.0), shape))
    got = chunked.make(Ramp(-2.0, 9.0), (5003,))
    assert_bitwise(got, host_values(Linspace(-2.0, 9.0), (5003,)))
    got = chunked.make(Constant(-0.0), (2500,))
    assert_bitwise(got, host_values(Fill(-0.0), (2500,)))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 256, 1000, 65_537])
@pytest.mark.parametrize(
    ("start", "stop"),
    [(0.0, 1.0), (-3.3, 7.1), (5.0, -5.0), (-0.0, -0.0), (1e-3, 1e-3), (0.1, 0.7), (-1e30, 3e38)],
)
def test_linspace_matches_numpy(n: int, start: float, stop: float, generator: Generator) -> None:
    got = generator.make(Ramp(start, stop), (n,))
    assert_bitwise(got, host_values(Linspace(start, stop), (n,)))


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, 0.1, 1e-40, -3.4e38, 3.4028234663852886e38])
def test_fill_matches_numpy(value: float, generator: Generator) -> None:
    for shape in [(1,), (1001,), (3, 5)]:
        got = generator.make(Constant(value), shape)
        assert_bitwise(got, host_values(Fill(value), shape))


def test_a_device_without_64_bit_features_says_why(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device, "features", ())  # as a device lacking both reports them
    with Kernels(device) as kernels:
        reason = kernels.cannot_generate(Uniform.from_seed(1, 0.0, 1.0), 10)
        assert reason == (
            "the device lacks shaderInt64 and shaderFloat64 (needed to match numpy bit for bit)"
        )
        assert kernels.cannot_generate(Ramp(0.0, 1.0), 10) == reason
        assert kernels.cannot_generate(Constant(2.0), 10) is None  # bits: no 64-bit types
        with CommandPool(device) as pool, OwnedArray(device, (10,)) as out:
            cmd = pool.allocate()
            cmd.begin()
            with pytest.raises(ValueError, match="lacks shaderInt64"):
                kernels.generate(cmd, Uniform.from_seed(1, 0.0, 1.0), out.array)
            cmd.close()


def test_parameters_near_zero_are_left_to_the_host(kernels: Kernels) -> None:
    # Below 2^-900 the doubles could turn subnormal, which Vulkan lets a device flush.
    assert "low is below 2^-900" in str(kernels.cannot_generate(Uniform(1, 1, TINY / 4, 1.0), 5))
    near = 2.0**-899
    narrow = Uniform(1, 1, near, near + 2.0**-951)
    assert "high - low is below 2^-900" in str(kernels.cannot_generate(narrow, 5))
    assert "the step is below" in str(kernels.cannot_generate(Ramp(0.0, TINY * 2), 10**6))
    assert "underflows" in str(kernels.cannot_generate(Ramp(0.0, 5e-324), 3))
    assert kernels.cannot_generate(Uniform(1, 1, 0.0, 0.0), 5) is None
    assert kernels.cannot_generate(Ramp(-0.0, 0.0), 5) is None
