"""The compute pipelines of one device: made on first use, cached by shader and specialization
(and between processes by the driver's pipeline cache, kernels/saved_pipelines.py).

Descriptor sets are cached too, by the (buffer, offset, range) bindings they point at: a set
is written once and never changed, so recordings (even ones in flight) can share it.

Workgroup sizes and tiles come from the device's limits; the reduction, matvec and jacobi
shaders come in a subgroup-arithmetic build and a shared-memory-only build, picked by what
the device reports.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpulab.kernels import saved_pipelines
from gpulab.kernels.matmul_tiles import MatmulPlan, MatmulTile, choose_plans, choose_tiles
from gpulab.vk import (
    Buffer,
    ComputePipeline,
    DescriptorPool,
    DescriptorSet,
    DescriptorSetLayout,
    Device,
    PipelineCache,
    PipelineLayout,
    ShaderModule,
)
from gpulab.vk.buffer import closed_buffers
from gpulab.vk.shader import packaged_spirv

PUSH_CONSTANT_BYTES = 64
"""One push-constant range for every kernel (the largest, uniform's, takes 52 bytes; every
device offers at least 128)."""
_PREFERRED_WORKGROUP = 256
_SETS_PER_POOL = 256
_MAX_BINDINGS = 5
CACHED_SETS = 1024
"""Descriptor sets kept for reuse per device; beyond it, sets of closed buffers go first, then
the least recently used."""

Specialization = tuple[tuple[int, int | float | bool], ...]
Bindings = tuple[tuple[Buffer, int, int], ...]
"""(buffer, byte offset, byte range) of bindings 0..n-1: a descriptor set's contents."""


def _power_of_two_at_most(limit: int) -> int:
    return 1 << (max(limit, 1).bit_length() - 1)


@dataclass(frozen=True)
class Geometry:
    """Launch shapes derived from the device's limits."""

    workgroup_size: int
    """Invocations per workgroup of the 1-D kernels: 256 where allowed, a power of two."""
    max_groups: int
    """maxComputeWorkGroupCount[0]."""
    max_groups_y: int
    """maxComputeWorkGroupCount[1] (matmul's row blocks)."""
    binding_elements: int
    """Elements per storage binding: within maxStorageBufferRange, a multiple of 4 and of the
    offset alignment, so that the next chunk starts aligned."""
    matmul_tiles: tuple[MatmulTile, ...]
    """matmul's workgroup shapes, largest block first (kernels/matmul_tiles.py)."""
    matmul_plans: Mapping[str, MatmulPlan]
    """matmul's plan per shape regime (kernels/matmul_tiles.py's regime)."""
    subgroup_arithmetic: bool


def geometry(
    device: Device, max_binding_bytes: int | None = None, subgroups: bool | None = None
) -> Geometry:
    """The launch shapes for `device`. `max_binding_bytes` lowers the binding range, and
    `subgroups=False` picks the shared-memory builds where subgroups would serve (tests)."""
    info = device.info
    workgroup = _power_of_two_at_most(
        min(_PREFERRED_WORKGROUP, info.max_workgroup_size[0], info.max_workgroup_invocations)
    )
    limit = info.max_storage_buffer_range
    if max_binding_bytes is not None:
        limit = min(limit, max_binding_bytes)
    step = 4 * max(4, info.min_storage_buffer_offset_alignment // 4)
    while step % 16:
        step *= 2
    binding_bytes = limit - limit % step
    if binding_bytes <= 0:
        raise ValueError(f"a binding of {limit} bytes cannot hold one aligned chunk")
    return Geometry(
        workgroup_size=workgroup,
        max_groups=info.max_workgroup_count[0],
        max_groups_y=info.max_workgroup_count[1],
        binding_elements=binding_bytes // 4,
        matmul_tiles=choose_tiles(info),
        matmul_plans=choose_plans(info),
        subgroup_arithmetic="arithmetic" in info.subgroup_operations and subgroups is not False,
    )


class PipelineCatalog:
    """Pipelines, layouts and descriptor sets of one device, made lazily and owned here."""

    def __init__(self, device: Device, shape: Geometry) -> None:
        self.device = device
        self.geometry = shape
        self._cache = PipelineCache(device, saved_pipelines.load(device.info))
        self._unsaved = 0
        """Pipelines made since the cache was seeded or saved."""
        self._layouts: dict[int, tuple[DescriptorSetLayout, PipelineLayout]] = {}
        self._pipelines: dict[tuple[str, Specialization], ComputePipeline] = {}
        self._pools: list[DescriptorPool] = []
        self._current = 0
        # The key holds its buffers, so their ids cannot be reused while the entry lives.
        # Each entry: the set, and closed_buffers() when its buffers were last seen open.
        self._sets: OrderedDict[Bindings, list[Any]] = OrderedDict()

    def shader_name(self, family: str) -> str:
        """The build of `family` (reduce, matvec, jacobi) this device can run."""
        return f"{family}_{'subgroup' if self.geometry.subgroup_arithmetic else 'shared'}"

    def layout(self, bindings: int) -> tuple[DescriptorSetLayout, PipelineLayout]:
        """The set layout and pipeline layout for `bindings` storage buffers."""
        if bindings not in self._layouts:
            set_layout = DescriptorSetLayout(self.device, bindings)
            try:
                layout = PipelineLayout(self.device, [set_layout], PUSH_CONSTANT_BYTES)
            except BaseException:
                set_layout.close()
                raise
            self._layouts[bindings] = (set_layout, layout)
        return self._layouts[bindings]

    def pipeline(
        self,
        shader: str,
        bindings: int,
        specialization: Specialization | Mapping[int, int | float | bool],
        *,
        spirv: bytes | None = None,
    ) -> ComputePipeline:
        """The pipeline of `shader` with these specialization constants (made once): (id,
        value) pairs in id order, the cache key as given, or a mapping of id to value.
        `spirv`: the module's code, for a shader not in the package (a user's kernel, then
        named by its code's hash)."""
        if not isinstance(specialization, tuple):
            specialization = tuple(sorted(specialization.items()))
        key = (shader, specialization)
        found = self._pipelines.get(key)
        if found is None:
            _, layout = self.layout(bindings)
            code = spirv if spirv is not None else packaged_spirv(shader)
            with ShaderModule(self.device, code) as module:
                found = ComputePipeline(
                    self.device,
                    layout,
                    module,
                    specialization=dict(specialization),
                    cache=self._cache,
                )
            self._pipelines[key] = found
            self._unsaved += 1
        return found

    def save_cache(self) -> None:
        """Write the pipeline cache back to disk (kernels.saved_pipelines) when pipelines were
        made since it was seeded: the next process on this device compiles none of them."""
        if self._unsaved:
            saved_pipelines.save(self.device.info, self._cache.data())
            self._unsaved = 0

    def descriptor_set(self, bindings: Sequence[tuple[Buffer, int, int]]) -> DescriptorSet:
        """The set pointing at these bindings: written on first use, then reused while every
        buffer in it is open (a closed buffer's sets are never bound again)."""
        key = tuple(bindings)
        entry = self._sets.get(key)
        if entry is not None:
            closed = closed_buffers()
            if entry[1] == closed or _usable(entry[0], key):
                entry[1] = closed
                self._sets.move_to_end(key)
                found: DescriptorSet = entry[0]
                return found
            del self._sets[key]
        descriptor_set = self._allocate_set(len(key))
        descriptor_set.write_buffers(key)
        self._sets[key] = [descriptor_set, closed_buffers()]
        if len(self._sets) > CACHED_SETS:
            self._trim_sets()
        return descriptor_set

    def _trim_sets(self) -> None:
        """Drop the sets of closed buffers, then the least recently used down to 3/4 of the
        limit. A dropped set is freed when no recording refers to it any more."""
        closed = closed_buffers()
        stale = []
        for key, entry in self._sets.items():
            if entry[1] != closed:  # else: no buffer was closed since it was last looked at
                if not _usable(entry[0], key):
                    stale.append(key)
                entry[1] = closed
        for key in stale:
            del self._sets[key]
        while len(self._sets) > CACHED_SETS * 3 // 4:
            self._sets.popitem(last=False)

    def _allocate_set(self, bindings: int) -> DescriptorSet:
        """A fresh set for `bindings` buffers; freed when the last reference to it goes
        (the cache and the command buffers that bound it)."""
        set_layout, _ = self.layout(bindings)
        # The pool that served last first; the others only when it is full (their sets are
        # freed as the cache drops them and recordings are replaced), a new pool when all are.
        order = self._pools[self._current :] + self._pools[: self._current]
        for offset, pool in enumerate(order):
            if not pool.full:
                self._current = (self._current + offset) % len(self._pools)
                return pool.allocate(set_layout)
        pool = DescriptorPool(self.device, _SETS_PER_POOL, _MAX_BINDINGS * _SETS_PER_POOL)
        self._pools.append(pool)
        self._current = len(self._pools) - 1
        return pool.allocate(set_layout)

    def close(self) -> None:
        """Destroy everything made here (descriptor sets of live recordings included)."""
        self.save_cache()
        self._sets.clear()
        for pool in self._pools:
            pool.close()
        for pipeline in self._pipelines.values():
            pipeline.close()
        for set_layout, layout in self._layouts.values():
            layout.close()
            set_layout.close()
        self._cache.close()
        self._pools, self._pipelines, self._layouts, self._current = [], {}, {}, 0


def _usable(descriptor_set: DescriptorSet, bindings: Bindings) -> bool:
    """Whether a cached set may be bound again: it and every buffer it points at are open."""
    return not descriptor_set.closed and all(not buffer.closed for buffer, _, _ in bindings)
