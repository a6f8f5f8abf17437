"""Dispatches appended to a command buffer: the kernels each op's recording is made of
(gpulab.kernels.op_recordings says which an op records)."""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from gpulab.kernels.array import FLOAT_BYTES, DeviceArray
from gpulab.kernels.jacobi_status import STATUS_WORDS
from gpulab.kernels.matmul_tiles import MatmulPlan, MatmulTile, regime, split_depth, tile_for
from gpulab.kernels.pipelines import PipelineCatalog, Specialization
from gpulab.vk import Buffer, CommandBuffer

Scratch = Callable[[int], DeviceArray]
"""nbytes -> a DeviceArray of at least that many bytes, alive until the submission is done."""
Input = DeviceArray | float
Binding = tuple[Buffer, int, int]


class Reduction(NamedTuple):
    """How reduce.glsl computes one reduction (its OP codes)."""

    first: int
    """The OP code of the first pass, over the input."""
    combine: int
    """The OP code that combines partials."""
    root: bool = False
    """Take the square root in the last pass (l2_norm)."""
    needs_elements: bool = False
    """An empty input has no result (min, max)."""


_FLOATS_PER_INVOCATION = 16  # reduce.glsl: four vec4 loads per loop iteration

# Each kernel's push constants (u: uint32, f: float32), packed by a prebuilt Struct.
_FILL_PUSH = struct.Struct("<IffI").pack  # count, value, step, period
_COPY_PUSH = struct.Struct("<I").pack  # vec4 count
_FILL_BITS_PUSH = struct.Struct("<II").pack  # count, word
_NONFINITE_PUSH = struct.Struct("<II").pack  # count, index of the binding's first element
NO_ELEMENT = 0xFFFFFFFF
"""A 32-bit element index that names none: first_nonfinite's when every element is finite,
linspace's when a dispatch holds no last element."""
_ELEMENTWISE_PUSH = struct.Struct("<IIfI").pack  # count, vec4, literal a, unused
_REDUCE_PUSH = struct.Struct("<IIII").pack  # count, vec4, first partial, finish
_MATVEC_PUSH = struct.Struct("<III").pack  # m, n, vec4
_MATMUL_PUSH = struct.Struct("<IIII").pack  # m, k, n, vec4 flags (B 2, C 4)
_MATMUL_SPLIT_PUSH = struct.Struct("<IIIIII").pack  # the same, depths per slice, slice stride
_MATMUL_SUM_PUSH = struct.Struct("<IIII").pack  # floats, slices, slice stride, vec4
# n, step, check every, use tolerance, tolerance, vec4
_JACOBI_PUSH = struct.Struct("<IIIIfI").pack


class Recording:
    """One record() call: an op's dispatches appended to `cmd`, counted in `dispatches`."""

    def __init__(
        self,
        catalog: PipelineCatalog,
        cmd: CommandBuffer,
        scratch: Scratch | None,
        alignment: int,
    ) -> None:
        self.catalog = catalog
        self.geometry = catalog.geometry
        self.cmd = cmd
        self._scratch = scratch
        self._alignment = alignment
        self.dispatches = 0

    # --- plumbing ----------------------------------------------------------------------

    def scratch(self, nbytes: int, what: str) -> DeviceArray:
        if self._scratch is None:
            raise ValueError(f"{what} needs scratch memory: pass scratch= to record()")
        return self._scratch(nbytes)

    def aligned(self, nbytes: int) -> int:
        """nbytes rounded up to an offset any binding may start at."""
        return -(-nbytes // self._alignment) * self._alignment

    def groups(self, items: int) -> int:
        geometry = self.geometry
        return max(1, min(-(-items // geometry.workgroup_size), geometry.max_groups))

    def dispatch(
        self,
        shader: str,
        specialization: Specialization | Mapping[int, int | float | bool],
        bindings: Sequence[Binding],
        push: bytes,
        groups: tuple[int, int, int],
        *,
        spirv: bytes | None = None,
    ) -> None:
        pipeline = self.catalog.pipeline(shader, len(bindings), specialization, spirv=spirv)
        cmd, layout = self.cmd, pipeline.layout
        cmd.bind_pipeline(pipeline)
        cmd.bind_descriptor_sets(layout, (self.catalog.descriptor_set(bindings),))
        cmd.push_constants(layout, push)
        cmd.dispatch(*groups)
        self.dispatches += 1

    def user_kernel(
        self,
        key: str,
        spirv: bytes,
        bindings: Sequence[Binding],
        *,
        local_x: int,
        scalars: Sequence[float],
        out: DeviceArray,
        per_invocation: int = 1,
        grid: bool = False,
    ) -> None:
        """A user's shader (SPIR-V `spirv`, cached as `key`): one invocation per
        `per_invocation` elements of `out` (4 for a vec4 output) in workgroups of `local_x`
        along x, the scalars pushed as float32. Past the device's workgroups along x, a
        `grid` shader (one that reads gl_NumWorkGroups) gets rows of them along y."""
        invocations = -(-out.size // max(per_invocation, 1))
        groups = max(1, -(-invocations // max(local_x, 1)))
        across, rows = groups, 1
        if groups > self.geometry.max_groups:
            if not grid:
                raise ValueError(
                    f"kernel: {out.size} elements need {groups} workgroups of {local_x}, more "
                    f"than the device's {self.geometry.max_groups} along x; a shader that "
                    "indexes gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * "
                    "gl_NumWorkGroups.x * gl_WorkGroupSize.x gets a 2-D grid (docs/cli.md)"
                )
            across = self.geometry.max_groups
            rows = -(-groups // across)
            if rows > self.geometry.max_groups_y:
                raise ValueError(
                    f"kernel: {out.size} elements need {groups} workgroups of {local_x}, more "
                    f"than the device's {across} x {self.geometry.max_groups_y}"
                )
        pipeline = self.catalog.pipeline(key, len(bindings), (), spirv=spirv)
        cmd, layout = self.cmd, pipeline.layout
        cmd.bind_pipeline(pipeline)
        cmd.bind_descriptor_sets(layout, (self.catalog.descriptor_set(bindings),))
        if scalars:
            cmd.push_constants(layout, struct.pack(f"<{len(scalars)}f", *scalars))
        cmd.dispatch(across, rows)
        self.dispatches += 1
        self.barrier()

    def barrier(self) -> None:
        self.cmd.barrier("compute", "compute")

    # --- the kernels the ops record (gpulab.kernels.op_recordings) --------------------

    def fill(self, out: DeviceArray, value: float, step: float = 0.0, period: int = 1) -> None:
        chunk = self.geometry.binding_elements
        for first in range(0, out.size, chunk):
            count = min(chunk, out.size - first)
            push = _FILL_PUSH(count, value, step, period)
            self.dispatch(
                "fill",
                ((0, self.geometry.workgroup_size),),
                (out.elements(first, count),),
                push,
                (self.groups(count), 1, 1),
            )
        self.barrier()

    def first_nonfinite(self, x: DeviceArray, first: DeviceArray) -> None:
        """first[0] = the index of x's first NaN or infinity (by its bits), else NO_ELEMENT.
        x has fewer than NO_ELEMENT elements."""
        if x.size >= NO_ELEMENT:
            raise ValueError(f"first_nonfinite: {x.size} elements do not fit a 32-bit index")
        size = ((0, self.geometry.workgroup_size),)
        self.dispatch(
            "fill_bits", size, (first.elements(0, 1),), _FILL_BITS_PUSH(1, NO_ELEMENT), (1, 1, 1)
        )
        self.barrier()
        chunk = self.geometry.binding_elements
        for start in range(0, x.size, chunk):
            count = min(chunk, x.size - start)
            self.dispatch(
                "nonfinite",
                size,
                (x.elements(start, count), first.elements(0, 1)),
                _NONFINITE_PUSH(count, start),
                (self.groups(count), 1, 1),
            )
        self.barrier()

    def copy(self, x: DeviceArray, out: DeviceArray) -> None:
        if x.size != out.size or x.size % 4:
            raise ValueError("copy: x and out must have the same size, a multiple of 4")
        chunk = self.geometry.binding_elements
        for first in range(0, x.size, chunk):
            count = min(chunk, x.size - first)
            self.dispatch(
                "copy",
                ((0, self.geometry.workgroup_size),),
                (x.elements(first, count), out.elements(first, count)),
                _COPY_PUSH(count // 4),
                (self.groups(count // 4), 1, 1),
            )
        self.barrier()

    def elementwise(
        self, x: DeviceArray, y: DeviceArray | None, a: Input, out: DeviceArray, *, divide: bool
    ) -> None:
        from_buffer = isinstance(a, DeviceArray)
        specialization = (
            (0, self.geometry.workgroup_size),
            (1, y is not None),
            (2, divide),
            (3, from_buffer),
        )
        literal = 0.0 if isinstance(a, DeviceArray) else float(a)
        chunk = self.geometry.binding_elements
        size = x.size
        for first in range(0, size, chunk):
            count = min(chunk, size - first)
            xb = x.elements(first, count)
            yb = y.elements(first, count) if y is not None else xb
            ob = out.elements(first, count)
            sb = a.elements(0, 1) if isinstance(a, DeviceArray) else xb
            vec4 = xb[1] % 16 == 0 and yb[1] % 16 == 0 and ob[1] % 16 == 0
            push = _ELEMENTWISE_PUSH(count, vec4, literal, 0)
            items = -(-count // 4) if vec4 else count
            self.dispatch(
                "elementwise", specialization, (xb, yb, ob, sb), push, (self.groups(items), 1, 1)
            )
        self.barrier()

    def _pass_groups(self, n: int) -> int:
        chunk = self.geometry.binding_elements
        per_group = self.geometry.workgroup_size * _FLOATS_PER_INVOCATION
        return sum(
            max(1, min(math.ceil(min(chunk, n - first) / per_group), self.geometry.max_groups))
            for first in range(0, n, chunk)
        )

    def _reduce_pass(
        self,
        code: int,
        x: DeviceArray,
        y: DeviceArray | None,
        target: DeviceArray,
        finish: bool,
    ) -> None:
        chunk = self.geometry.binding_elements
        per_group = self.geometry.workgroup_size * _FLOATS_PER_INVOCATION
        shader = self.catalog.shader_name("reduce")
        specialization = ((0, self.geometry.workgroup_size), (1, code))
        written = 0
        for first in range(0, x.size, chunk):
            count = min(chunk, x.size - first)
            groups = max(1, min(math.ceil(count / per_group), self.geometry.max_groups))
            xb = x.elements(first, count)
            yb = y.elements(first, count) if y is not None else xb
            vec4 = xb[1] % 16 == 0 and yb[1] % 16 == 0
            push = _REDUCE_PUSH(count, vec4, written, finish)
            self.dispatch(shader, specialization, (xb, yb, target.binding()), push, (groups, 1, 1))
            written += groups
        self.barrier()

    def reduce(
        self,
        what: str,
        reduction: Reduction,
        x: DeviceArray,
        y: DeviceArray | None,
        out: DeviceArray,
    ) -> None:
        """`reduction` of x (and y) into the scalar `out`; `what` names it in errors."""
        if x.size == 0:
            if reduction.needs_elements:
                raise ValueError(f"{what} of an empty vector")
            self.fill(out, 0.0)
            return
        targets = self._levels(x.size, out, what)
        code, source, second = reduction.first, x, y
        for target in targets:
            self._reduce_pass(code, source, second, target, reduction.root and target is out)
            code, source, second = reduction.combine, target, None

    def _levels(self, size: int, out: DeviceArray, what: str) -> list[DeviceArray]:
        """Where each pass of a reduction over `size` elements writes: n -> partials -> ...
        -> 1; every level but the last (`out`) in scratch."""
        levels = [self._pass_groups(size)]
        while levels[-1] > 1:
            levels.append(self._pass_groups(levels[-1]))
        intermediate = levels[:-1]
        offsets, total = [], 0
        for count in intermediate:
            offsets.append(total)
            total += self.aligned(FLOAT_BYTES * count)
        area = self.scratch(total, what) if intermediate else out
        return [
            DeviceArray(area.buffer, (count,), area.offset + offset)
            for count, offset in zip(intermediate, offsets, strict=True)
        ] + [out]

    def fused(
        self,
        key: str,
        spirv: bytes,
        bindings: Sequence[Binding],
        *,
        numbers: Sequence[float],
        count: int,
        reductions: Sequence[tuple[Reduction, DeviceArray]],
    ) -> None:
        """A fused group's shader (gpulab.kernels.fused, SPIR-V `spirv` cached as `key`) over
        `count` elements in one binding each: one dispatch, then each reduction's combining
        passes (the packaged shader's) from its partials down to its scalar."""
        vec4 = all(offset % 16 == 0 for _, offset, _ in bindings)
        size = self.geometry.workgroup_size
        if not reductions:
            items = -(-count // 4) if vec4 else count
            push = struct.pack(f"<II{len(numbers)}f", count, vec4, *numbers)
            groups = (self.groups(items), 1, 1)
            self.dispatch(key, ((0, size),), bindings, push, groups, spirv=spirv)
            self.barrier()
            return
        levels = [self._levels(count, out, key) for _, out in reductions]
        roots = [
            reduction.root and targets[0] is out
            for (reduction, out), targets in zip(reductions, levels, strict=True)
        ]
        if len(reductions) == 1:  # reduce.glsl's first pass
            specialization: Specialization = ((0, size), (1, reductions[0][0].first))
            push = struct.pack(f"<IIII{len(numbers)}f", count, vec4, 0, roots[0], *numbers)
        else:
            specialization = ((0, size),)
            finish = sum(1 << k for k, root in enumerate(roots) if root)
            push = struct.pack(f"<III{len(numbers)}f", count, vec4, finish, *numbers)
        partials = [targets[0].binding() for targets in levels]
        groups = (self._pass_groups(count), 1, 1)
        self.dispatch(key, specialization, (*bindings, *partials), push, groups, spirv=spirv)
        self.barrier()
        for (reduction, out), targets in zip(reductions, levels, strict=True):
            for source, target in itertools.pairwise(targets):
                root = reduction.root and target is out
                self._reduce_pass(reduction.combine, source, None, target, root)

    def matvec(self, a: DeviceArray, x: DeviceArray, out: DeviceArray) -> None:
        m, n = a.shape
        if m == 0:
            return
        if n == 0:
            self.fill(out, 0.0)
            return
        vec4 = n % 4 == 0 and a.offset % 16 == 0 and x.offset % 16 == 0
        self.dispatch(
            self.catalog.shader_name("matvec"),
            ((0, self.geometry.workgroup_size),),
            (a.binding(), x.binding(), out.binding()),
            _MATVEC_PUSH(m, n, vec4),
            (min(m, self.geometry.max_groups), 1, 1),
        )
        self.barrier()

    def matmul(self, a: DeviceArray, b: DeviceArray, out: DeviceArray) -> None:
        (m, k), (_, n) = a.shape, b.shape
        if m == 0 or n == 0:
            return
        if k == 0:
            self.fill(out, 0.0)
            return
        plan = self.geometry.matmul_plans[regime(m, k, n)]
        tile = plan.tile or tile_for(self.geometry.matmul_tiles, m, n, plan.split)
        groups = (math.ceil(n / tile.block_cols), math.ceil(m / tile.block_rows), 1)
        if groups[0] > self.geometry.max_groups or groups[1] > self.geometry.max_groups_y:
            raise ValueError(f"matmul: a {m}x{n} result needs more workgroups than the device has")
        # vec4 loads of B and stores of C where rows are whole vec4s and the bindings start
        # 16-aligned (A's panel is read by scalars, whatever its shape).
        flags = int(n % 4 == 0 and b.offset % 16 == 0) << 1
        if plan.split_shader:
            self._matmul_split(a, b, out, plan=plan, tile=tile, groups=groups, flags=flags)
            return
        flags |= int(n % 4 == 0 and out.offset % 16 == 0) << 2
        self.dispatch(
            plan.source,
            tile.specialization,
            (a.binding(), b.binding(), out.binding()),
            _MATMUL_PUSH(m, k, n, flags),
            groups,
        )
        self.barrier()

    def _matmul_split(
        self,
        a: DeviceArray,
        b: DeviceArray,
        out: DeviceArray,
        *,
        plan: MatmulPlan,
        tile: MatmulTile,
        groups: tuple[int, int, int],
        flags: int,
    ) -> None:
        """matmul_split.comp (or matmul_split_unrolled.comp): k in slices written one after another
        into scratch (then matmul_sum.comp adds them into `out`), or straight into `out` when
        one slice is left (k too short to split, no scratch, or too many floats for one
        binding)."""
        (m, k), n = a.shape, out.shape[1]
        chunk, slices = split_depth(k, plan.split, tile.depth)
        stride = -(-m * n // 4) * 4  # whole vec4s, so every slice starts 16-byte aligned
        fits = slices * stride <= self.geometry.binding_elements
        if slices > 1 and (self._scratch is None or not fits):
            chunk, slices = k, 1
        target = out
        if slices > 1:
            area = self.scratch(FLOAT_BYTES * slices * stride, "matmul")
            target = DeviceArray(area.buffer, (slices * stride,), area.offset)
        flags |= int(n % 4 == 0 and target.offset % 16 == 0) << 2
        self.dispatch(
            plan.source,
            tile.split_specialization(plan.staged),
            (a.binding(), b.binding(), target.binding()),
            _MATMUL_SPLIT_PUSH(m, k, n, flags, chunk, stride),
            (groups[0], groups[1], slices),
        )
        self.barrier()
        if slices > 1:
            count = m * n
            vec4 = target.offset % 16 == 0 and out.offset % 16 == 0
            self.dispatch(
                "matmul_sum",
                ((0, self.geometry.workgroup_size),),
                (target.binding(), out.binding()),
                _MATMUL_SUM_PUSH(count, slices, stride, vec4),
                (self.groups(-(-count // 4)), 1, 1),
            )
            self.barrier()

    def jacobi(
        self, a: DeviceArray, b: DeviceArray, out: DeviceArray, params: Mapping[str, Any]
    ) -> DeviceArray:
        """The Jacobi steps into `out`; returns the status words (jacobi_status)."""
        iterations = int(params.get("iterations", 0))
        tolerance = params.get("tolerance")
        check_every = int(params.get("check_every", 1))
        if iterations < 0:
            raise ValueError(f"jacobi: iterations must be at least 0, got {iterations}")
        if check_every < 1:
            raise ValueError(f"jacobi: check_every must be at least 1, got {check_every}")
        n = b.size
        status_area = self.scratch(FLOAT_BYTES * STATUS_WORDS, "jacobi")
        status = DeviceArray(status_area.buffer, (STATUS_WORDS,), status_area.offset)
        self.fill(status, 0.0)
        if iterations == 0 or n == 0:
            self.fill(out, 0.0)
            return status
        spare = self.scratch(FLOAT_BYTES * n, "jacobi")
        other = DeviceArray(spare.buffer, (n,), spare.offset)
        # The result of step t lands in buffers[(t + 1) % 2]: start so that the last is `out`.
        buffers = (out, other) if iterations % 2 == 0 else (other, out)
        self.fill(buffers[0], 0.0)
        shader = self.catalog.shader_name("jacobi")
        pipeline = self.catalog.pipeline(shader, 5, ((0, self.geometry.workgroup_size),))
        layout = pipeline.layout
        # Two descriptor sets, one per direction of the ping-pong, bound alternately.
        sets = [
            self.catalog.descriptor_set(
                (
                    a.binding(),
                    b.binding(),
                    buffers[parity].binding(),
                    buffers[1 - parity].binding(),
                    status.binding(),
                )
            )
            for parity in (0, 1)
        ]
        use_tolerance = tolerance is not None
        limit = float(tolerance) if tolerance is not None else 0.0
        groups = min(n, self.geometry.max_groups)
        vec4 = n % 4 == 0 and all(x.offset % 16 == 0 for x in (a, *buffers))
        self.cmd.bind_pipeline(pipeline)
        for step in range(iterations):
            self.cmd.bind_descriptor_sets(layout, (sets[step % 2],))
            push = _JACOBI_PUSH(n, step, check_every, use_tolerance, limit, vec4)
            self.cmd.push_constants(layout, push)
            self.cmd.dispatch(groups)
            self.dispatches += 1
            self.barrier()
        return status
