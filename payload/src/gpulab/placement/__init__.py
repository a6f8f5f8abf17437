"""Which device a run uses: `--device N`, else the GPU Slurm gave the job (its ids from the
environment, its files from gres.conf), else device 0; and which device file is which GPU.

Reads Slurm's environment and files, the NVIDIA driver's and the Vulkan device list; runs
nothing on a device. Names are imported on first use (PEP 562).
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes

if TYPE_CHECKING:
    from gpulab.placement.device_choice import DeviceChoice, choose_device
    from gpulab.placement.gpu_files import HostFiles, files_by_device

__all__ = ["DeviceChoice", "HostFiles", "choose_device", "files_by_device"]

_MODULES = {
    "device_choice": ("DeviceChoice", "choose_device"),
    "gpu_files": ("HostFiles", "files_by_device"),
}
__getattr__, __dir__ = lazy_attributes(
    __name__, {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}
)
