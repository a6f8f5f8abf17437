"""gpulab.ops.spirv reads what a compute shader declares from its SPIR-V words."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulab.ops.spirv import SpirvError, reflect

SHADERS = Path(__file__).resolve().parents[2] / "payload" / "src" / "gpulab" / "shaders"


def test_gpulabs_own_shaders() -> None:
    copy = reflect((SHADERS / "copy.spv").read_bytes())
    # local_size_x_id: the specialization constant's default (pipelines set the real size).
    assert copy.local_size == (1, 1, 1)
    assert [(b.set, b.binding, b.storage) for b in copy.bindings] == [(0, 0, True), (0, 1, True)]
    assert copy.push_constant_bytes == 4  # one uint
    assert reflect((SHADERS / "uniform.spv").read_bytes()).push_constant_bytes == 52


@pytest.mark.parametrize(
    "data", [b"", b"\0" * 24, b"hello, world", b"\x03\x02\x23\x07" + b"\0" * 3]
)
def test_not_spirv(data: bytes) -> None:
    with pytest.raises(SpirvError):
        reflect(data)
