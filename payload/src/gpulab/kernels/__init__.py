"""gpulab.kernels: the contract's ops as Vulkan compute kernels on device-resident arrays.

`Kernels(device)` makes pipelines lazily (specialized to the device's limits) and records ops
into command buffers (`record`), or runs one op on numpy data (`run`). `DeviceArray` names a
float32 array in a device buffer. `Kernels.generate` makes graph inputs on the device
(`Uniform`, `Ramp`, `Constant`: bit for bit what numpy makes); `Kernels.first_nonfinite`
checks an input's values where it lies. `DeviceSession` opens a device
with its memory manager, stager, kernels and submitter, each owned once.
"""

from gpulab.kernels._recording import NO_ELEMENT, Input, Scratch
from gpulab.kernels.array import DeviceArray, OwnedArray
from gpulab.kernels.generate import Constant, Pattern, Ramp, Uniform
from gpulab.kernels.op_recordings import REDUCTIONS, Extra
from gpulab.kernels.pipelines import Geometry
from gpulab.kernels.recorder import EXTRA_OPS, Kernels, Recorded
from gpulab.kernels.session import DeviceSession

__all__ = [
    "EXTRA_OPS",
    "NO_ELEMENT",
    "REDUCTIONS",
    "Constant",
    "DeviceArray",
    "DeviceSession",
    "Extra",
    "Geometry",
    "Input",
    "Kernels",
    "OwnedArray",
    "Pattern",
    "Ramp",
    "Recorded",
    "Scratch",
    "Uniform",
]
