"""The validation net: with GPULAB_VK_VALIDATION=1, a test fails on any validation message.

`make test` runs the kernel, graph and memory suites this way (see the Makefile's test-payload):
the Khronos layer with synchronization validation, whose errors and warnings every process of
the run (this one and each `gpulab` it starts) appends to one file (GPULAB_VK_VALIDATION_LOG).
After each test, the lines it added fail it, message by message. A test that provokes a message
on purpose takes it with `vulkan_validation.take()`.

A suite's conftest imports both fixtures by name; without GPULAB_VK_VALIDATION they do nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpulab.vk import shared_instance
from gpulab.vk.instance import VALIDATION_LAYER, VALIDATION_LOG_ENV, validation_requested


class ValidationMessages:
    """The lines of the messages file written since the last take()."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = path.stat().st_size if path is not None else 0

    @property
    def active(self) -> bool:
        """Whether this run is under the validation layer."""
        return self.path is not None

    def take(self) -> list[str]:
        """The messages reported since the last take (or the start of the test)."""
        if self.path is None:
            return []
        with self.path.open("rb") as messages:
            messages.seek(self.offset)
            new = messages.read()
        self.offset += len(new)
        return new.decode(errors="replace").splitlines()


@pytest.fixture(scope="session", autouse=True)
def vulkan_validation_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path | None]:
    """The messages file of this run, or None without GPULAB_VK_VALIDATION."""
    if not validation_requested():
        yield None
        return
    if not shared_instance().validation:
        pytest.exit(
            f"GPULAB_VK_VALIDATION=1 but {VALIDATION_LAYER} is not installed "
            "(apt install vulkan-validationlayers; see docs/kernels.md)",
            returncode=3,
        )
    path = tmp_path_factory.mktemp("vulkan-validation") / "messages.txt"
    path.touch()
    before = os.environ.get(VALIDATION_LOG_ENV)
    os.environ[VALIDATION_LOG_ENV] = str(path)  # inherited by every process a test starts
    yield path
    if before is None:
        os.environ.pop(VALIDATION_LOG_ENV, None)
    else:
        os.environ[VALIDATION_LOG_ENV] = before


@pytest.fixture(autouse=True)
def vulkan_validation(vulkan_validation_log: Path | None) -> Iterator[ValidationMessages]:
    """Fails the test (at teardown, after its devices are closed) on any message not taken."""
    messages = ValidationMessages(vulkan_validation_log)
    yield messages
    left = messages.take()
    if left:
        pytest.fail(
            f"the Vulkan validation layer reported {len(left)} message(s):\n" + "\n".join(left),
            pytrace=False,
        )
