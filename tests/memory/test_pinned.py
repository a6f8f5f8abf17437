"""Pinned host arrays and imported host memory on a real device (lavapipe here): the bytes,
the paths, the stats. Targets that a test reads apart from the Stager are "mapped" memory."""

from __future__ import annotations

import numpy as np
import pytest
from gpulab.memory import AllocationFreedError, MemoryManager, PinnedArray, Stager
from gpulab.memory.host_import import HostImporter
from gpulab.vk import Device

STAGED = {"upload": "staged", "download": "staged"}


def test_pinned_arrays_round_trip_with_one_copy(device: Device) -> None:
    data = np.random.default_rng(2).standard_normal((64, 300)).astype(np.float32)
    with MemoryManager(device) as manager, Stager(manager, paths=STAGED) as stager:
        target = manager.allocate(data.nbytes, kind="mapped")
        source = stager.pinned_empty(data.shape, np.float32)
        assert isinstance(source, PinnedArray)
        assert source.shape == data.shape
        source[:] = data
        stager.upload(source, target)
        np.testing.assert_array_equal(target.read(np.float32, data.size), data.reshape(-1))
        back = stager.pinned_empty(data.shape, np.float32)
        assert stager.download(target, data.shape, out=back) is back
        np.testing.assert_array_equal(back, data)
        counts = stager.stats()["transfers"]
        assert counts["upload"]["pinned"] == 1
        assert counts["download"]["pinned"] == 1
        assert counts["upload"]["staged"] == counts["download"]["staged"] == 0
        source.free()
        back.free()
        target.free()


def test_a_pinned_slice_moves_from_its_offset(device: Device) -> None:
    with MemoryManager(device) as manager, Stager(manager, paths=STAGED) as stager:
        pinned = stager.pinned_empty(1000, np.int32)
        pinned[:] = np.arange(1000, dtype=np.int32)
        target = manager.allocate(400, kind="mapped")
        stager.upload(pinned[500:600], target)
        np.testing.assert_array_equal(target.read(np.int32, 100), np.arange(500, 600))
        stager.download(target, 100, np.int32, out=pinned[:100])
        np.testing.assert_array_equal(pinned[:100], np.arange(500, 600))
        assert stager.stats()["transfers"]["upload"]["pinned"] == 1
        assert (pinned + 1).pin is None  # a new array is not pinned memory
        pinned.free()
        target.free()


def test_a_pinned_array_after_free_raises(device: Device) -> None:
    with MemoryManager(device) as manager, Stager(manager) as stager:
        target = manager.allocate(64)
        pinned = stager.pinned_empty(16, np.float32)
        view = pinned[4:]
        pinned.free()
        pinned.free()  # a second free does nothing
        with pytest.raises(AllocationFreedError):
            stager.upload(pinned, target)
        with pytest.raises(AllocationFreedError):
            stager.download(target, 12, out=view)
        del view
        target.free()


def test_statistics_count_pinned_arrays(device: Device) -> None:
    with MemoryManager(device) as manager, Stager(manager) as stager:
        first = stager.pinned_empty((256, 4), np.float32)
        second = stager.pinned_empty(10, np.float64)
        assert stager.stats()["pinned_arrays"] == 2
        assert stager.stats()["pinned_bytes"] == 4096 + 80
        stats = manager.stats()
        assert stats["transfers"]["pinned_arrays"] == 2
        assert stats["in_use_bytes"] >= 4096 + 80
        first.free()
        assert manager.stats()["transfers"]["pinned_bytes"] == 80
        del first, second  # close() frees what is left
    assert stager.stats()["pinned_arrays"] == 0


def test_imported_arrays_round_trip(device: Device) -> None:
    if not HostImporter(device).usable:
        pytest.skip("this device cannot import host memory")
    data = np.arange(100_001, dtype=np.float32)[1:]  # an address that is not page-aligned
    with MemoryManager(device) as manager, Stager(manager, import_above=0, paths=STAGED) as s:
        target = manager.allocate(data.nbytes, kind="mapped")
        s.upload(data, target)
        np.testing.assert_array_equal(target.read(np.float32, data.size), data)
        out = np.zeros_like(data)
        s.download(target, data.shape, out=out)
        np.testing.assert_array_equal(out, data)
        assert s.stats()["transfers"]["upload"]["imported"] == 1
        assert s.stats()["transfers"]["download"]["imported"] == 1
        target.free()


def test_small_arrays_are_not_imported(device: Device) -> None:
    data = np.ones(1024, dtype=np.float32)
    with MemoryManager(device) as manager, Stager(manager, import_above=1 << 20, paths=STAGED) as s:
        target = manager.allocate(data.nbytes)
        s.upload(data, target)
        assert s.stats()["transfers"]["upload"] == {
            "pinned": 0,
            "registered": 0,
            "imported": 0,
            "staged": 0,
            "direct": 0,
            "inline": 1,  # 4 KiB: carried by the recording itself
            "file": 0,
            "file_direct": 0,
        }
        target.free()


@pytest.mark.parametrize("memory", ["write_combined", "cached"])
def test_either_upload_ring_memory_moves_the_bytes(device: Device, memory: str) -> None:
    data = np.random.default_rng(3).integers(0, 255, 300_000, dtype=np.uint8)
    with (
        MemoryManager(device) as manager,
        Stager(manager, chunk_bytes=1 << 16, threads=2, upload_memory=memory, paths=STAGED) as s,
    ):
        target = manager.allocate(data.nbytes)
        s.upload(data, target)
        np.testing.assert_array_equal(s.download(target, data.shape, np.uint8), data)
        target.free()


def test_registered_arrays_round_trip_until_unregistered(device: Device) -> None:
    if not HostImporter(device).usable:
        pytest.skip("this device cannot import host memory")
    data = np.arange(50_001, dtype=np.float32)[1:]
    out = np.zeros_like(data)
    with MemoryManager(device) as manager, Stager(manager, paths=STAGED) as stager:
        target = manager.allocate(data.nbytes)
        stager.register(data)
        stager.register(out)
        with pytest.raises(ValueError, match="already registered"):
            stager.register(data[10:])
        stager.upload(data, target)
        stager.download(target, 100, out=out[200:300])  # a slice of a registered array
        np.testing.assert_array_equal(out[200:300], data[:100])
        stager.download(target, data.shape, out=out)
        np.testing.assert_array_equal(out, data)
        stats = stager.stats()
        assert stats["registered_arrays"] == 2
        assert stats["registered_bytes"] == 2 * data.nbytes
        assert stats["transfers"]["upload"]["registered"] == 1
        assert stats["transfers"]["download"]["registered"] == 2
        assert manager.stats()["transfers"]["registered_arrays"] == 2
        stager.unregister(data)
        with pytest.raises(ValueError, match="is not registered"):
            stager.unregister(data)
        stager.upload(data, target)  # staged again
        assert stager.stats()["transfers"]["upload"]["staged"] == 1
        target.free()  # close() releases the import of `out`


def test_register_refuses_strided_arrays(device: Device) -> None:
    with (
        MemoryManager(device) as manager,
        Stager(manager) as stager,
        pytest.raises(ValueError, match="non-empty C-contiguous"),
    ):
        stager.register(np.zeros((4, 4), dtype=np.float32)[:, 1])
