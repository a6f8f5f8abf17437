"""DeviceSession: one device with its memory manager, stager, kernels and submitter, each
owned once and released in reverse order; and vk's Submitter underneath it."""

from __future__ import annotations

import numpy as np
import pytest
from gpulab.kernels import DeviceSession, Kernels
from gpulab.memory import MemoryManager
from gpulab.vk import Device, Instance, ObjectClosedError, Submitter, live_handles


def test_a_session_holds_each_part_once_and_closes_them_all(process_instance: Instance) -> None:
    before = live_handles()
    session = DeviceSession(0, instance=process_instance)
    assert isinstance(session.manager, MemoryManager)
    assert isinstance(session.kernels, Kernels)
    assert session.kernels.device is session.device
    assert session.manager.device is session.device
    assert session.submitter.device is session.device
    assert session.info.name == process_instance.physical_device(0).info.name
    session.close()
    assert session.closed and session.device.closed
    assert session.manager.closed and session.submitter.closed
    assert live_handles() == before
    session.close()  # a second close does nothing


def test_the_stager_is_made_on_first_use_and_released_by_the_session(
    process_instance: Instance,
) -> None:
    with DeviceSession(0, instance=process_instance) as session:
        assert "transfers" not in session.manager.stats()  # nothing staged, no ring
        stager = session.stager
        assert session.stager is stager
        target = session.manager.allocate(64)
        data = np.arange(16, dtype=np.float32)
        stager.upload(data, target)
        np.testing.assert_array_equal(stager.download(target, data.shape), data)
        target.free()
        other = session.open_stager(threads=1)
        assert other is not stager and other.threads == 1
    # The manager closed the extra stager with the session's own (the leak check after it).
    with pytest.raises(ObjectClosedError):
        _ = session.device.raw
    assert session.manager.closed


def test_a_session_runs_an_op(process_instance: Instance) -> None:
    with DeviceSession(0, instance=process_instance, memory_budget=1 << 26) as session:
        assert set(session.heap_limits.values()) == {
            min(heap.size, 1 << 26) for heap in session.info.memory_heaps
        }
        x = np.arange(8, dtype=np.float32)
        np.testing.assert_array_equal(session.kernels.run("scale", x=x, a=3.0), 3 * x)


def test_a_failed_session_releases_what_it_made(
    process_instance: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = live_handles()

    def refuse(device: Device) -> None:
        raise RuntimeError("no submitter today")

    monkeypatch.setattr("gpulab.kernels.session.Submitter", refuse)
    with pytest.raises(RuntimeError, match="no submitter today"):
        DeviceSession(0, instance=process_instance)
    assert live_handles() == before


def test_a_submitter_records_submits_and_waits(device: Device) -> None:
    with Submitter(device) as submitter:
        submitter.command.begin()
        submitter.command.barrier("host", "compute")
        submitter.command.end()
        submitter.submit()
        submitter.submit()  # the fence was reset: the same recording runs again
        extra = submitter.allocate()
        extra.begin()
        extra.end()
        submitter.submit(extra)
    assert submitter.closed and submitter.fence.closed
    submitter.close()
