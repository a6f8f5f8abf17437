"""gpulab.kernel: a user's compute shader called on device arrays (lavapipe), with the
binding convention of graph kernel nodes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from gpulab import kernel
from gpulab.kernels import OwnedArray
from gpulab.ops.user_kernel import KernelError, compile_glsl
from gpulab.vk import Device

pytestmark = pytest.mark.skipif(shutil.which("glslc") is None, reason="glslc is not installed")

SOFTPLUS_SCALED = """#version 450
layout(local_size_x = 32) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { float a; float b; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < o.length()) o[i] = p.a * log(1.0 + exp(x[i])) + p.b * y[i];
}
"""


@pytest.fixture
def shader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "softplus.comp"
    path.write_text(SOFTPLUS_SCALED, encoding="utf-8")
    return path


def _expected(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (2.0 * np.log1p(np.exp(x.astype(np.float64))) + 0.5 * y).astype(np.float32)


@pytest.mark.parametrize("n", [1, 31, 1000])
def test_kernel_on_device_arrays(device: Device, shader: Path, n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.uniform(-3, 3, n).astype(np.float32)
    y = rng.uniform(-1, 1, n).astype(np.float32)
    with (
        kernel(shader) as softplus,
        OwnedArray(device, (n,)) as dx,
        OwnedArray(device, (n,)) as dy,
        OwnedArray(device, (n,)) as out,
    ):
        dx.write(x)
        dy.write(y)
        softplus(dx, dy.array, 2.0, 0.5, out=out)
        softplus(dx, dy, 2.0, 0.5, out=out.array)  # a second call reuses the pipeline
        np.testing.assert_allclose(out.read(), _expected(x, y), rtol=1e-5, atol=1e-6)


def test_kernel_from_spirv_bytes_and_mismatches(device: Device, shader: Path) -> None:
    spirv = compile_glsl(shader, shader.name)
    with kernel(spirv, name="softplus") as softplus, OwnedArray(device, (4,)) as a:
        a.write(np.zeros(4))
        with pytest.raises(KernelError, match="declares bindings"):
            softplus(a, 2.0, 0.5, out=a)
        with pytest.raises(KernelError, match="push-constant block has 8 bytes"):
            softplus(a, a, 2.0, out=a)
        with pytest.raises(TypeError, match="device arrays or numbers"):
            softplus(a, np.zeros(4), 2.0, 0.5, out=a)  # type: ignore[arg-type]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KernelError, match="not found"):
        kernel(tmp_path / "none.comp")
