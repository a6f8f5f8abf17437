"""gpulab.kernel: a user's compute shader called on device arrays (lavapipe), with the
binding convention of graph kernel nodes."""

from __future__ import annotations

import math
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


PLUS_ONE = """#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
void main() {
    uint i = INDEX;
    if (i < o.length()) o[i] = x[i] + 1.0;
}
"""
GRID_INDEX = "gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x"


def test_more_workgroups_than_the_device_has_along_x(device: Device, tmp_path: Path) -> None:
    """One invocation per workgroup: past maxComputeWorkGroupCount[0] elements, a shader that
    reads gl_NumWorkGroups gets rows of workgroups along y; one that does not is refused."""
    n = device.info.max_workgroup_count[0] + 1000
    if n > 1 << 22:
        pytest.skip(f"{n} workgroups along x: too many elements for this test")
    x = np.arange(n, dtype=np.float32)
    grid_path, plain_path = tmp_path / "grid.comp", tmp_path / "plain.comp"
    grid_path.write_text(PLUS_ONE.replace("INDEX", GRID_INDEX), encoding="utf-8")
    plain_path.write_text(PLUS_ONE.replace("INDEX", "gl_GlobalInvocationID.x"), encoding="utf-8")
    with (
        kernel(compile_glsl(grid_path, "grid.comp"), name="grid") as grid,
        kernel(compile_glsl(plain_path, "plain.comp"), name="plain") as plain,
        OwnedArray(device, (n,)) as dx,
        OwnedArray(device, (n,)) as out,
    ):
        assert grid.reflection.reads_workgroup_count
        assert not plain.reflection.reads_workgroup_count
        dx.write(x)
        grid(dx, out=out)
        np.testing.assert_array_equal(out.read(), x + 1)
        with pytest.raises(ValueError, match="gets a 2-D grid"):
            plain(dx, out=out)


PLUS_ONE_VEC4 = """#version 450
layout(local_size_x = 32) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) buffer Invocations { uint invocations; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(std430, binding = 2) writeonly buffer Out4 { vec4 o4[]; };
void main() {
    atomicAdd(invocations, 1u);
    uint i = gl_GlobalInvocationID.x;
    if (i < o4.length()) {
        o4[i] = x4[i] + 1.0;
    } else if (i == o4.length()) {  // the last n % 4 elements
        for (uint j = 4 * i; j < o.length(); ++j) o[j] = x[j] + 1.0;
    }
}
"""


@pytest.mark.parametrize("n", [1, 4, 1001, 4096])
def test_a_vec4_output_takes_one_invocation_per_four_elements(
    device: Device, tmp_path: Path, n: int
) -> None:
    path = tmp_path / "plus_one_vec4.comp"
    path.write_text(PLUS_ONE_VEC4, encoding="utf-8")
    x = np.arange(n, dtype=np.float32)
    with (
        kernel(compile_glsl(path, path.name), name="vec4") as plus_one,
        OwnedArray(device, (n,)) as dx,
        OwnedArray(device, (1,)) as invocations,
        OwnedArray(device, (n,)) as out,
    ):
        assert plus_one.reflection.floats_per_invocation(2) == 4
        assert plus_one.reflection.floats_per_invocation(1) == 1
        dx.write(x)
        invocations.write(np.zeros(1, np.float32))  # the bits of uint 0
        out.write(np.full(n, -1, np.float32))
        plus_one(dx, invocations, out=out)
        np.testing.assert_array_equal(out.read(), x + 1)
        groups = math.ceil(math.ceil(n / 4) / 32)
        assert int(invocations.read().view(np.uint32)[0]) == 32 * groups
