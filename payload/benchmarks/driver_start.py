"""What a cold process pays the Vulkan driver before its first dispatch (issue 50's floor).

    python3 payload/benchmarks/driver_start.py [bare|ours|preload|preload_all|gil] ...

Each mode runs in a new interpreter (this file, once per mode given; `bare` first if
`preload_all` is asked for, which needs its list) and prints one JSON line of milliseconds
since the interpreter started: `import_vulkan` (the PyPI binding), `create_instance`,
`enum_devices`, `create_device`, and the shared libraries the process loaded at the instance
and at the device. Modes:

- `bare`: vkCreateInstance and vkCreateDevice as plainly as the binding allows (one queue);
- `ours`: the device as gpulab.vk.Device asks for it (VK_EXT_external_memory_host,
  shaderInt64, shaderFloat64);
- `preload`: each installed ICD's library dlopened first through ctypes (`preloaded`);
- `preload_all`: every library `bare` saw loaded, dlopened first;
- `gil`: the ICD libraries dlopened on a second thread while this one counts, which tells
  whether ctypes' dlopen lets the GIL go (`spins`);
- `one_icd`: VK_ICD_FILENAMES names one manifest per distinct driver library (a host with two
  manifests of one library has the loader start that driver twice);
- `no_implicit`: the loader's implicit layers off (VK_LOADER_LAYERS_DISABLE=~implicit~ and
  NVIDIA's DISABLE_LAYER_NV_OPTIMUS_1).

Every mode also says which ICD manifests it found (`manifests`) and how many physical devices
the loader reported (`physical_devices`).

It needs the binding and a driver only (no gpulab): what is left is the driver's own time.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import ctypes  # noqa: E402 - after T0: the interpreter's start is the origin
import glob  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from typing import Any  # noqa: E402

MODES = ("bare", "ours", "preload", "preload_all", "gil", "one_icd", "no_implicit")
ICD_FOLDERS = (
    "/etc/xdg/vulkan/icd.d",
    "/etc/vulkan/icd.d",
    "/usr/local/share/vulkan/icd.d",
    "/usr/share/vulkan/icd.d",
    "/usr/local/nvidia/share/vulkan/icd.d",
)
"""The loader's default search path (XDG_CONFIG_DIRS, SYSCONFDIR, XDG_DATA_DIRS), and where
NVIDIA's container images keep the driver's manifest."""
SEEN = "/tmp/gpulab-driver-start-libraries.json"
"""Where `bare` leaves the libraries it saw loaded, for `preload_all`."""


def ms() -> float:
    return round((time.perf_counter() - T0) * 1000, 1)


def libraries() -> set[str]:
    found = set()
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            path = line.split()[-1]
            if path.startswith("/") and ".so" in path:
                found.add(path)
    return found


def icd_manifests() -> dict[str, str]:
    """Each ICD manifest found, and the library it names."""
    found = {}
    for folder in ICD_FOLDERS:
        for path in sorted(glob.glob(f"{folder}/*.json")):
            with open(path, encoding="utf-8") as manifest:
                found[os.path.realpath(path)] = json.load(manifest)["ICD"]["library_path"]
    return found


def one_manifest_per_library(manifests: dict[str, str]) -> str:
    firsts: dict[str, str] = {}
    for path, library in manifests.items():
        firsts.setdefault(library, path)
    return ":".join(firsts.values())


def preload(mode: str, manifests: dict[str, str], marks: dict[str, Any]) -> None:
    names = list(manifests.values())
    if mode == "preload_all":
        with open(SEEN, encoding="utf-8") as seen:
            names = ["libvulkan.so.1", *json.load(seen)]
    if mode == "gil":
        done = threading.Event()

        def load() -> None:
            for name in names:
                ctypes.CDLL(name)
            done.set()

        threading.Thread(target=load).start()
        started, spins = time.perf_counter(), 0
        while not done.is_set():
            spins += 1
        marks["thread_ms"] = round((time.perf_counter() - started) * 1000, 1)
        marks["spins"] = spins
    else:
        for name in names:
            try:
                ctypes.CDLL(name)
            except OSError as exc:
                marks.setdefault("failed", []).append(str(exc))
    marks["preloaded"] = ms()


def measure(mode: str) -> dict[str, Any]:
    marks: dict[str, Any] = {"start": ms()}
    before = libraries()
    marks["manifests"] = manifests = icd_manifests()
    if mode == "one_icd":
        marks["icd_filenames"] = one_manifest_per_library(manifests)
        os.environ["VK_ICD_FILENAMES"] = marks["icd_filenames"]
    elif mode == "no_implicit":
        os.environ["VK_LOADER_LAYERS_DISABLE"] = "~implicit~"
        os.environ["DISABLE_LAYER_NV_OPTIMUS_1"] = "1"
    elif mode not in ("bare", "ours"):
        preload(mode, manifests, marks)
    import vulkan as vk  # noqa: PLC0415 - timed

    marks["import_vulkan"] = ms()
    app = vk.VkApplicationInfo(pApplicationName="probe", apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
    marks["create_instance"] = ms()
    at_instance = libraries()
    physicals = vk.vkEnumeratePhysicalDevices(instance)
    marks["enum_devices"] = ms()
    marks["physical_devices"] = len(physicals)
    physical = physicals[0]
    queue = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=0, queueCount=1, pQueuePriorities=[1.0])
    extra: dict[str, Any] = {}
    if mode == "ours":
        extra = {
            "enabledExtensionCount": 1,
            "ppEnabledExtensionNames": ["VK_EXT_external_memory_host"],
            "pEnabledFeatures": vk.VkPhysicalDeviceFeatures(shaderInt64=1, shaderFloat64=1),
        }
    info = vk.VkDeviceCreateInfo(queueCreateInfoCount=1, pQueueCreateInfos=[queue], **extra)
    vk.vkCreateDevice(physical, info, None)
    marks["create_device"] = ms()
    at_device = libraries()
    if mode == "bare":
        ours = {p for p in at_device if "python" in p or "site-packages" in p}
        with open(SEEN, "w", encoding="utf-8") as seen:
            json.dump(sorted(at_device - before - ours), seen)
    marks["new_at_instance"] = sorted(at_instance - before)
    marks["new_at_device"] = sorted(at_device - at_instance)
    return marks


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps({"mode": sys.argv[2], "marks": measure(sys.argv[2])}), flush=True)
        os._exit(0)  # the driver's teardown is not what this measures
    modes = sys.argv[1:] or list(MODES)
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        sys.exit(f"unknown modes {unknown}; choose from {', '.join(MODES)}")
    if "preload_all" in modes and "bare" not in modes:
        modes.insert(0, "bare")
    for mode in modes:
        subprocess.run([sys.executable, __file__, "--one", mode], check=False)


if __name__ == "__main__":
    main()
