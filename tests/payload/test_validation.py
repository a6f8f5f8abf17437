"""With the Khronos validation layer on, the layer's own use of Vulkan is clean."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
import pytest
from gpulab import GpuComputePipeline
from gpulab.vk import Buffer, Device, Instance
from gpulab.vk.instance import VALIDATION_LAYER, available_layers

pytestmark = pytest.mark.skipif(
    VALIDATION_LAYER not in available_layers(),
    reason=f"{VALIDATION_LAYER} is not installed (apt install vulkan-validationlayers)",
)
VALIDATION_LOG = "gpulab.vk.validation"


@pytest.fixture
def validated() -> Iterator[Instance]:
    with Instance(validation=True) as instance:
        assert instance.validation
        yield instance


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_compute_pipeline_raises_no_validation_message(
    validated: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger=VALIDATION_LOG),
        GpuComputePipeline(instance=validated, max_binding_bytes=1024) as pipeline,
    ):
        for n in (1, 257, 5000, 300):
            values = np.arange(n, dtype=np.float32)
            assert np.array_equal(pipeline.execute(values), values * 2)
    assert [r.getMessage() for r in caplog.records] == []


def test_misuse_is_reported_through_logging(
    validated: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger=VALIDATION_LOG),
        Device(validated.physical_device(0)) as device,
    ):
        Buffer(device, 64, usage=0).close()  # usage must not be 0
    assert any("VUID-VkBufferCreateInfo-usage" in message for message in _errors(caplog))
