"""Device inventory: compute properties, queue family choice, validation switch."""

from __future__ import annotations

import logging

import pytest
from gpulab.vk import Instance, QueueFamily
from gpulab.vk.bare_instance import VALIDATION_ENV
from gpulab.vk.instance import (
    VALIDATION_LAYER,
    shared_instance,
    validation_requested,
)
from gpulab.vk.physical_device import pick_compute_family


def test_device_properties(instance: Instance) -> None:
    info = instance.physical_device(0).info
    assert info.type in {"discrete", "integrated", "virtual", "cpu", "other"}
    if "llvmpipe" in info.name:
        assert (info.type, info.driver) == ("cpu", "llvmpipe")
    assert info.api_version.startswith("1.")
    assert info.subgroup_size >= 1
    assert "basic" in info.subgroup_operations
    assert all(v > 0 for v in info.max_workgroup_size + info.max_workgroup_count)
    assert info.max_workgroup_invocations > 0
    assert info.max_shared_memory_bytes > 0
    assert info.max_storage_buffer_range > 0
    assert info.timestamp_period_ns > 0
    assert info.timestamp_valid_bits > 0
    assert info.device_local_bytes == sum(h.size for h in info.memory_heaps if h.device_local)
    assert info.memory_types
    assert info.compute_queue_family is not None


def _family(index: int, *flags: str) -> QueueFamily:
    return QueueFamily(index, 1, flags, 64)


def test_a_dedicated_compute_family_is_preferred() -> None:
    families = (
        _family(0, "graphics", "compute", "transfer"),
        _family(1, "transfer"),
        _family(2, "compute", "transfer"),
    )
    assert pick_compute_family(families) == 2
    assert pick_compute_family(families[:2]) == 0
    assert pick_compute_family(families[1:2]) is None


def test_validation_is_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VALIDATION_ENV, raising=False)
    assert not validation_requested()
    monkeypatch.setenv(VALIDATION_ENV, "1")
    assert validation_requested()


def test_validation_without_the_layer_warns_and_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(VALIDATION_ENV, "1")
    with caplog.at_level(logging.WARNING, logger="gpulab.vk.validation"), Instance() as instance:
        available = instance.validation
    if not available:
        assert VALIDATION_LAYER in caplog.text


def test_the_shared_instance_is_made_once_and_remade_after_close() -> None:
    assert shared_instance() is shared_instance()
