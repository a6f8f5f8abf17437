"""first_nonfinite: the index of an array's first NaN or infinity, found on the device (the
check of a .npy input's values where the Vulkan backend read the file), over one binding or
several, with the smallest index winning wherever the bad values are."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest
from gpulab.kernels import NO_ELEMENT, Kernels, OwnedArray
from gpulab.vk import CommandPool, Device, Fence

NAN_PAYLOAD = np.array([0x7FC01234], dtype=np.uint32).view(np.float32)[0]
NEGATIVE_NAN = np.array([0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0]


def first_nonfinite(device: Device, kernels: Kernels, values: npt.NDArray[np.float32]) -> int:
    with (
        CommandPool(device) as pool,
        Fence(device) as fence,
        OwnedArray(device, values.shape) as x,
        OwnedArray(device, (1,)) as first,
    ):
        x.write(values)
        first.write(np.zeros(1, dtype=np.float32))  # not NO_ELEMENT: the kernel sets it
        cmd = pool.allocate()
        try:
            cmd.begin()
            cmd.barrier("host", "compute")
            kernels.first_nonfinite(cmd, x.array, first.array)
            cmd.barrier("compute", "host")
            cmd.end()
            device.submit(cmd, fence)
            fence.wait()
        finally:
            cmd.close()
        return int(first.read().view(np.uint32)[0])


@pytest.fixture
def chunked(device: Device) -> Iterator[Kernels]:
    """Bindings of 1000 floats: a long array is checked in several dispatches."""
    with Kernels(device, max_binding_bytes=4000) as kernels:
        assert kernels.elements_per_binding() <= 1000
        yield kernels


def test_finite_values_have_none(device: Device, kernels: Kernels) -> None:
    finite = np.array(
        [0.0, -0.0, 1e-45, -1e-45, 3.4028235e38, -3.4028235e38, 1.0], dtype=np.float32
    )
    assert first_nonfinite(device, kernels, finite) == NO_ELEMENT
    assert first_nonfinite(device, kernels, np.zeros(65_537, dtype=np.float32)) == NO_ELEMENT


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, NAN_PAYLOAD, NEGATIVE_NAN])
@pytest.mark.parametrize("where", [0, 1, 4096, 65_536])
def test_each_kind_of_bad_value_is_found_where_it_is(
    device: Device, kernels: Kernels, bad: float, where: int
) -> None:
    values = np.ones(65_537, dtype=np.float32)
    values[where] = bad
    assert first_nonfinite(device, kernels, values) == where


def test_the_first_of_several_wins_across_bindings(device: Device, chunked: Kernels) -> None:
    values = np.random.default_rng(9).standard_normal(5003).astype(np.float32)
    assert first_nonfinite(device, chunked, values) == NO_ELEMENT
    for positions in ([4999, 17], [2500, 1999, 4000], [5002], [999, 1000, 1001]):
        marked = values.copy()
        marked[positions] = np.inf
        assert first_nonfinite(device, chunked, marked) == min(positions)
