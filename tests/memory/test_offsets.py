"""The pure-Python offset allocator splits and merges exactly; the native one is the default."""

from __future__ import annotations

import pytest
from gpulab.memory.offsets import FirstFitAllocator, default_factory
from gpulab.native import OutOfSpace


def test_splitting_keeps_alignment_padding_free() -> None:
    offsets = FirstFitAllocator(1024)
    assert offsets.allocate(10) == 0
    assert offsets.allocate(100, alignment=64) == 64
    assert offsets.free_regions() == [(10, 54), (164, 860)]
    stats = offsets.stats()
    assert (stats.used, stats.free, stats.allocation_count) == (110, 914, 2)
    assert (stats.largest_free_region, stats.free_region_count) == (860, 2)


def test_freeing_merges_with_both_neighbours() -> None:
    offsets = FirstFitAllocator(300)
    a, b, c = (offsets.allocate(100) for _ in range(3))
    offsets.free(a)
    offsets.free(c)
    assert offsets.free_regions() == [(0, 100), (200, 100)]
    offsets.free(b)
    assert offsets.free_regions() == [(0, 300)]


def test_full_and_unknown_offsets_raise() -> None:
    offsets = FirstFitAllocator(128)
    offsets.allocate(100)
    with pytest.raises(OutOfSpace, match="no free region"):
        offsets.allocate(64)
    with pytest.raises(LookupError):
        offsets.free(8)
    with pytest.raises(ValueError, match="alignment 3"):
        offsets.allocate(8, alignment=3)


def test_the_native_suballocator_is_the_default_when_built() -> None:
    name, factory = default_factory()
    assert name == "native"  # `make native` has run wherever the tests run
    with factory(4096) as offsets:  # type: ignore[attr-defined]
        assert offsets.allocate(100, 256) % 256 == 0
