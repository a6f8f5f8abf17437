"""A user's compute shader as a Python callable on device arrays (`gpulab.kernel`), like
CuPy's RawKernel; the same shader, convention and cache as a graph's `"op": "kernel"` node
(gpulab.ops.user_kernel, docs/cli.md)."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

from gpulab.kernels._recording import Recording
from gpulab.kernels.array import DeviceArray, OwnedArray
from gpulab.kernels.pipelines import PipelineCatalog, geometry
from gpulab.ops.user_kernel import KernelError, check_convention, load_spirv, reflected
from gpulab.vk import Closeable, Device, Submitter


class Kernel(Closeable):
    """A compute shader called on device arrays: `k(x, 0.1, out=y)` binds the array
    arguments as storage buffers in order, then `out`; numbers are float32 push constants in
    order; one invocation per element of `out` (a 2-D grid past the device's workgroups along x
    for shaders that read gl_NumWorkGroups, docs/cli.md). Each call submits and waits.

    Pipelines are made on first use per device and kept until close()."""

    def __init__(self, spirv: bytes, name: str = "kernel") -> None:
        self.name = name
        self.spirv = spirv
        self.reflection = reflected(spirv, name)
        self._catalogs: dict[int, tuple[Device, PipelineCatalog]] = {}

    def _catalog(self, device: Device) -> PipelineCatalog:
        found = self._catalogs.get(id(device))
        if found is None or found[0] is not device:
            found = (device, PipelineCatalog(device, geometry(device)))
            self._catalogs[id(device)] = found
        return found[1]

    def __call__(
        self, *args: DeviceArray | OwnedArray | float, out: DeviceArray | OwnedArray
    ) -> None:
        target = out.array if isinstance(out, OwnedArray) else out
        arrays: list[DeviceArray] = []
        scalars: list[float] = []
        for arg in args:
            if isinstance(arg, OwnedArray):
                arrays.append(arg.array)
            elif isinstance(arg, DeviceArray):
                arrays.append(arg)
            elif isinstance(arg, int | float) and not isinstance(arg, bool):
                scalars.append(float(arg))
            else:
                raise TypeError(
                    f"kernel {self.name}: arguments are device arrays or numbers, "
                    f"got {type(arg).__name__}"
                )
        check_convention(
            self.name,
            self.reflection,
            tuple(f"array {i}" for i in range(len(arrays))),
            tuple(f"scalar {i}" for i in range(len(scalars))),
        )
        device = target.buffer.device
        if any(array.buffer.device is not device for array in arrays):
            raise ValueError(f"kernel {self.name}: the arrays are on different devices")
        catalog = self._catalog(device)
        alignment = math.lcm(16, device.info.min_storage_buffer_offset_alignment)
        bindings = [array.binding() for array in (*arrays, target)]
        with Submitter(device) as submitter:
            cmd = submitter.command
            cmd.begin()
            Recording(catalog, cmd, None, alignment).user_kernel(
                self.key,
                self.spirv,
                bindings,
                local_x=self.reflection.local_size[0],
                scalars=scalars,
                out=target,
                per_invocation=self.reflection.floats_per_invocation(len(arrays)),
                grid=self.reflection.reads_workgroup_count,
            )
            cmd.barrier("compute", "host")
            cmd.end()
            submitter.submit()

    @property
    def key(self) -> str:
        """The name its pipelines are cached by (the SPIR-V's sha256)."""
        return "user:" + hashlib.sha256(self.spirv).hexdigest()

    def close(self) -> None:
        """Destroy the pipelines made for it (the devices stay open); a second call does
        nothing."""
        catalogs, self._catalogs = self._catalogs, {}
        for _, catalog in catalogs.values():
            catalog.close()


def kernel(source: str | os.PathLike[str] | bytes, *, name: str | None = None) -> Kernel:
    """The callable of a compute shader: a `.comp` file (GLSL, compiled and cached as for a
    graph's kernel node), a `.spv` file, or SPIR-V bytes."""
    if isinstance(source, bytes):
        return Kernel(source, name or "kernel")
    path = Path(source)
    shown = name or path.name
    return Kernel(load_spirv(path, shown), shown)


__all__ = ["Kernel", "KernelError", "kernel"]
