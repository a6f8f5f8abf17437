"""A user's own compute shader as a graph node (`"op": "kernel"`, docs/cli.md).

The binding convention: the node's inputs that name a vector or matrix bind as storage buffers
0, 1, ... of set 0 in the order the node gives them, the output is the binding after them;
its number inputs are float32 push constants in that order (4 bytes each, from offset 0).
The dispatch is (ceil(N / local_size_x), 1, 1) workgroups for an output of N elements: the
shader indexes with gl_GlobalInvocationID.x and guards with the output's `.length()`.

GLSL (`.comp`) is compiled with glslc (or glslangValidator) where one is installed, the SPIR-V
cached by the sha256 of the source and the flags in `spirv/` of gpulab's cache; a
`.spv` file is used as it is. Every check here raises KernelError with one line.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulab._cache import cache_path, write_atomically
from gpulab.ops.spirv import Reflection, SpirvError, reflect

TARGET_ENV = "vulkan1.1"
"""The Vulkan version user kernels are compiled for (as gpulab's own shaders)."""
PUSH_CONSTANT_BYTES = 64
"""The push-constant bytes a kernel may use: 16 scalars (gpulab's pipeline layouts)."""
KERNEL_KEYS = ("file", "reference")
OUTPUT_KEYS = ("like", "shape")


class KernelError(ValueError):
    """A user kernel that cannot run: missing file, compile error, convention mismatch."""


@dataclass(frozen=True)
class UserKernel:
    """A kernel node's shader, checked against its inputs: what every backend needs."""

    name: str
    """The file as the node gives it (for messages)."""
    spirv: bytes = field(repr=False)
    reflection: Reflection
    arrays: tuple[str, ...]
    """The node's inputs bound as storage buffers, in binding order (the output follows)."""
    scalars: tuple[str, ...]
    """The node's inputs pushed as float32 push constants, in order."""
    like: str | None
    """The input whose shape the output has, or None for `shape`."""
    shape: tuple[int, ...] | None
    reference: str | None
    """"module:function" of a numpy reference (run on cpu and native)."""
    key: str = field(init=False)
    """The SPIR-V's sha256: its pipelines are cached by it, and it is part of the node's
    params as recordings are keyed (another shader of the same name is another recording)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", hashlib.sha256(self.spirv).hexdigest())


def compiler() -> list[str] | None:
    """The argv prefix of the GLSL compiler found on PATH (glslc first), or None."""
    found = _compiler_on(os.environ.get("PATH", os.defpath))
    return list(found) if found is not None else None


@functools.lru_cache(maxsize=8)
def _compiler_on(path: str) -> tuple[str, ...] | None:
    """compiler() for this PATH (looked up once per PATH: recording asks for every group)."""
    glslc = _which("glslc", path)
    if glslc:
        return (glslc, f"--target-env={TARGET_ENV}", "-fshader-stage=compute")
    glslang = _which("glslangValidator", path)
    if glslang:
        return (glslang, "-V", "--target-env", TARGET_ENV, "-S", "comp")
    return None


def _which(name: str, path: str) -> str | None:
    """The first executable `name` in the folders of `path` (shutil.which's answer, without
    the import of shutil, and of bz2 and lzma with it, on every run that records a group)."""
    for folder in path.split(os.pathsep):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


_DIAGNOSTIC = re.compile(r"^(?:ERROR: )?(?P<file>[^:]*):(?P<where>\d+(?::\d+)?):\s*(?P<rest>.*)$")


def _first_error(output: str, path: Path, name: str) -> str:
    """The compiler's first error, as NAME:LINE[:COLUMN]: error: MESSAGE."""
    for line in output.splitlines():
        found = _DIAGNOSTIC.match(line.strip())
        if found and "error" in line.lower() and Path(found["file"]).name == path.name:
            rest = found["rest"]
            rest = rest if rest.startswith("error") else f"error: {rest}"
            return f"{name}:{found['where']}: {rest}"
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return f"{name}: " + (lines[0] if lines else "the compiler failed")


def compile_glsl(path: Path, name: str) -> bytes:
    """The SPIR-V of the GLSL compute shader at `path`, from the cache when compiled before."""
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise KernelError(f"cannot read {name}: {exc.strerror or exc}") from exc
    return compile_source(source, name, path=path)


def compile_source(
    source: bytes, name: str, *, path: Path | None = None, include: Path | None = None
) -> bytes:
    """The SPIR-V of GLSL compute `source` (read from `path`, or written to a temporary file
    named `name`), `#include`s looked up in `include`; cached by the source and the flags."""
    argv = _compiler_argv(include)
    if argv is None:
        raise KernelError(
            f"cannot compile {name}: no glslc or glslangValidator on PATH (install "
            "shaderc or glslang-tools, as the vulkan role does, or give a compiled .spv)"
        )
    cached = _cache_file(argv, source)
    spirv = _read_cached(cached)
    if spirv is not None:
        return spirv
    # Imported only to compile: a run whose shaders are all cached never starts a process.
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="gpulab-kernel-") as work:
        if path is None:
            path = Path(work) / Path(name).name
            path.write_bytes(source)
        out = Path(work) / "kernel.spv"
        done = subprocess.run(
            [*argv, "-o", str(out), str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not out.exists():
            found = _first_error(done.stdout + "\n" + done.stderr, path, name)
            raise KernelError(f"kernel {found}")
        spirv = out.read_bytes()
    if cached is not None:
        write_atomically(cached, spirv)  # unwritable: the next run compiles again
    return spirv


def _compiler_argv(include: Path | None) -> list[str] | None:
    argv = compiler()
    if argv is not None and include is not None:
        argv.append(f"-I{include}")
    return argv


def _cache_file(argv: list[str], source: bytes) -> Path | None:
    """Where the SPIR-V of `source` compiled by `argv` is cached (None: no cache here)."""
    flags = " ".join([Path(argv[0]).name, *argv[1:]])
    digest = hashlib.sha256(flags.encode() + b"\0" + source).hexdigest()
    return cache_path("spirv", f"{digest}.spv")


def _read_cached(cached: Path | None) -> bytes | None:
    if cached is not None and cached.is_file():
        with contextlib.suppress(OSError):
            return cached.read_bytes()
    return None


def cached_spirv(source: bytes, *, include: Path | None = None) -> bytes | None:
    """The SPIR-V of `source` from the cache, or None: never compiled here (or no compiler
    to compile it, or no cache)."""
    argv = _compiler_argv(include)
    return None if argv is None else _read_cached(_cache_file(argv, source))


def compiles_many() -> bool:
    """Whether the compiler found here compiles several sources in one process (glslc)."""
    argv = compiler()
    return argv is not None and Path(argv[0]).name == "glslc"


def compile_ahead(sources: Sequence[bytes], *, include: Path | None = None) -> dict[bytes, bytes]:
    """Compile the `sources` that are not cached yet in one glslc process, into the cache;
    their SPIR-V by source. glslc's start-up (the built-ins' tables: some 70 ms here, 130 on
    the H100's host) is most of a small shader's compile, and it takes any number of files
    at once. With another compiler, or fewer than two sources to compile, nothing is done;
    nothing is raised: a source that fails here is compiled again, alone, by compile_source,
    which reports its error."""
    argv = _compiler_argv(include)
    if argv is None or not compiles_many():
        return {}
    cache_files = {source: _cache_file(argv, source) for source in sources}
    missing = [source for source, cached in cache_files.items() if _read_cached(cached) is None]
    if len(missing) < 2:
        return {}
    import subprocess  # noqa: PLC0415 - see compile_source
    import tempfile  # noqa: PLC0415

    compiled: dict[bytes, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="gpulab-kernels-") as work:
        names = [f"s{index}.comp" for index in range(len(missing))]
        for name, source in zip(names, missing, strict=True):
            (Path(work) / name).write_bytes(source)
        # -c: each file to NAME.spv in the working folder.
        subprocess.run([*argv, "-c", *names], cwd=work, capture_output=True, check=False)
        for name, source in zip(names, missing, strict=True):
            out = Path(work) / f"{name}.spv"
            if out.is_file():
                compiled[source] = out.read_bytes()
                cached = cache_files[source]
                if cached is not None:
                    write_atomically(cached, compiled[source])
    return compiled


def load_spirv(path: Path, name: str) -> bytes:
    """The SPIR-V of a `.spv` file as it is, or of a GLSL file compiled (and cached)."""
    if not path.is_file():
        raise KernelError(f"kernel file {name} not found (looked at {path})")
    if path.suffix == ".spv":
        try:
            return path.read_bytes()
        except OSError as exc:
            raise KernelError(f"cannot read {name}: {exc.strerror or exc}") from exc
    return compile_glsl(path, name)


def reflected(spirv: bytes, name: str) -> Reflection:
    """What the shader declares (KernelError when it is not a SPIR-V compute shader)."""
    try:
        return reflect(spirv)
    except SpirvError as exc:
        raise KernelError(f"kernel {name}: {exc}") from exc


def check_convention(
    name: str, reflection: Reflection, arrays: tuple[str, ...], scalars: tuple[str, ...]
) -> None:
    """The shader declares what the node's inputs bind (KernelError naming the difference)."""
    want = len(arrays) + 1
    bindings = reflection.bindings
    other = [b for b in bindings if b.set != 0 or not b.storage]
    if other:
        what = "not a storage buffer" if other[0].storage is False else "not in set 0"
        raise KernelError(
            f"kernel {name}: binding {other[0].binding} (set {other[0].set}) is {what}; "
            "inputs and the output bind as storage buffers of set 0"
        )
    numbers = sorted({b.binding for b in bindings})
    if numbers != list(range(want)):
        given = ", ".join(arrays) if arrays else "no array inputs"
        raise KernelError(
            f"kernel {name}: declares bindings {numbers} but the node binds {want} "
            f"(0..{want - 1}: {given}, then the output; inputs given by name bind as "
            "buffers, numbers are push constants)"
        )
    push = 4 * len(scalars)
    if push > PUSH_CONSTANT_BYTES:
        raise KernelError(f"kernel {name}: {len(scalars)} scalars, at most 16 fit")
    if reflection.push_constant_bytes != push:
        raise KernelError(
            f"kernel {name}: its push-constant block has {reflection.push_constant_bytes} "
            f"bytes but the node's {len(scalars)} scalar input(s) give {push}"
        )


def _output(raw: Any, inputs: Mapping[str, Any]) -> tuple[str | None, tuple[int, ...] | None]:
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in OUTPUT_KEYS:
        raise KernelError('output must be {"like": INPUT} or {"shape": [N] or [ROWS, COLS]}')
    if "like" in raw:
        like = raw["like"]
        if not isinstance(like, str) or like not in inputs:
            raise KernelError(
                f"output.like must name one of the node's inputs ({', '.join(inputs)})"
            )
        return like, None
    shape = raw["shape"]
    if (
        not isinstance(shape, list)
        or len(shape) > 2
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise KernelError("output.shape must be [], [N] or [ROWS, COLS] of whole numbers")
    return None, tuple(shape)


def load_kernel(raw_node: Mapping[str, Any], base_dir: Path) -> UserKernel:
    """A kernel node's shader, compiled or read, and checked against its inputs."""
    spec = raw_node.get("kernel")
    if not isinstance(spec, dict):
        raise KernelError('a kernel node needs "kernel": {"file": "NAME.comp" or "NAME.spv"}')
    unknown = [key for key in spec if key not in KERNEL_KEYS]
    if unknown:
        raise KernelError(f"kernel.{unknown[0]}: unknown key (known: {', '.join(KERNEL_KEYS)})")
    reference = spec.get("reference")
    if reference is not None and (not isinstance(reference, str) or ":" not in reference):
        raise KernelError('kernel.reference must be "module:function"')
    inputs = raw_node.get("inputs")
    if not isinstance(inputs, dict):
        raise KernelError("inputs must be an object")
    like, shape = _output(raw_node.get("output"), inputs)
    arrays = tuple(name for name, value in inputs.items() if isinstance(value, str))
    scalars = tuple(name for name, value in inputs.items() if not isinstance(value, str))
    name = spec.get("file")
    if not isinstance(name, str) or not name:
        raise KernelError("kernel.file must name a .comp or .spv file")
    spirv = load_spirv(base_dir / name, name)
    reflection = reflected(spirv, name)
    check_convention(name, reflection, arrays, scalars)
    return UserKernel(name, spirv, reflection, arrays, scalars, like, shape, reference)
