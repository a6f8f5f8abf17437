"""Where gpulab keeps what it makes once and reuses in later processes: the native backend's
parsed C declarations (`ffi/`), compiled GLSL (`spirv/`: user kernels, fused groups) and each
device's Vulkan pipeline cache (`pipelines/`). `$GPULAB_CACHE_DIR`, else
`$XDG_CACHE_HOME/gpulab`, else `~/.cache/gpulab`. A cache that cannot be read or written only
costs the next process the work again."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

CACHE_DIR_ENV = "GPULAB_CACHE_DIR"


def cache_root() -> Path:
    """The cache's folder (see the module docstring); not created here."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "gpulab"


def cache_path(*parts: str) -> Path | None:
    """`parts` under the cache's folder, or None where there is no home to put it in."""
    try:
        return cache_root().joinpath(*parts)
    except RuntimeError:  # Path.home() without $HOME or a passwd entry
        return None


def write_atomically(path: Path, data: bytes) -> bool:
    """`data` as `path`, whole or not at all (written beside it, then renamed over it), so that
    processes writing at once leave one whole file; False where it cannot be written."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        partial.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        return False
    return True
