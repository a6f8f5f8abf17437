"""Each device's Vulkan pipeline cache, kept between processes.

Making a compute pipeline means compiling its SPIR-V for the GPU: on an H100, 10 ms for the
four-node graph's five pipelines with the driver's own disk cache warm, 104 ms without it (a
new machine, or a home it cannot write), 1.1-1.9 ms from a VkPipelineCache seeded with what an
earlier process made. So a PipelineCatalog seeds its cache from `pipelines/` in gpulab's cache
(gpulab._cache), one file per pipelineCacheUUID (the driver's own word for which data it takes,
so that nodes of different GPUs sharing a home keep a file each), and writes it back when it
made pipelines the file lacked. The file is the driver's data behind a header and the data's
sha256: a truncated or damaged file is ignored (and replaced at the next save) rather than
handed to the driver, which checks only its own header.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from gpulab._cache import cache_path, write_atomically
from gpulab.vk import DeviceInfo

MAGIC = b"gpulab pipeline cache 1\n"
MAX_BYTES = 256 << 20
"""A file larger than this is not read (and so soon replaced by a smaller one)."""
_DIGEST_BYTES = 32


def cache_file(info: DeviceInfo) -> Path | None:
    """Where `info`'s device keeps its pipelines (None: no cache folder, or a driver that
    names no pipelineCacheUUID)."""
    if not info.pipeline_cache_uuid.strip("0"):
        return None
    name = f"{info.vendor_id:04x}-{info.device_id:04x}-{info.pipeline_cache_uuid}.bin"
    return cache_path("pipelines", name)


def load(info: DeviceInfo) -> bytes:
    """The pipeline cache data saved for `info`'s device, or b"" (none, unreadable, damaged)."""
    path = cache_file(info)
    if path is None:
        return b""
    try:
        if path.stat().st_size > MAX_BYTES:
            return b""
        content = path.read_bytes()
    except OSError:
        return b""
    header = len(MAGIC) + _DIGEST_BYTES
    digest, data = content[len(MAGIC) : header], content[header:]
    if not content.startswith(MAGIC) or hashlib.sha256(data).digest() != digest:
        return b""
    return data


def save(info: DeviceInfo, data: bytes) -> bool:
    """Keep `data` (vkGetPipelineCacheData's) for `info`'s device; False where it cannot."""
    path = cache_file(info)
    if path is None or not data or len(data) > MAX_BYTES:
        return False
    return write_atomically(path, MAGIC + hashlib.sha256(data).digest() + data)
