"""matmul's tile shape and plan for one device: the specialization constants of
shaders/matmul.comp, and the variants of matmul_split.comp that a shape regime may take.

A workgroup of threads_x x threads_y invocations computes an (8 threads_y) x (8 threads_x)
block of C, staging k in panels of `depth` through two shared buffers. The largest shape the
device's limits allow is taken (shared memory, invocations per workgroup and per dimension),
preferring a workgroup that is a whole number of subgroups. On a GPU, a product too small to
give that shape MIN_WORKGROUPS workgroups takes a smaller block instead (down to 64 x 64), so
that it still spreads over the device's multiprocessors; a CPU device keeps one shape (fewer
pipelines to compile) of at most 256 invocations (larger ones ran slower on lavapipe).
GPULAB_MATMUL_TILE=XxYxD (for example 16x16x8) picks the one shape by hand, for tuning and
tests; it must fit the device too.

Subgroup tiling (each 32-wide subgroup an 8 x 4 patch of invocations) is on for workgroups of
SUBGROUP_TILING_INVOCATIONS or more on devices with 32-wide subgroups: there the device's
register file already holds each invocation to its smallest share (NVIDIA: 128 registers at
512 invocations), so the registers it costs cannot lower occupancy, and the subgroup's shared
loads shrink. At 256 invocations it raised NVIDIA's count from 128 to 148 registers and halved
the workgroups per multiprocessor (docs/benchmarks.md).

A MatmulPlan says how one product runs: its tile (or the automatic choice above), a split of k
into slices (split-K: matmul_split.comp writes one result per slice, matmul_sum.comp adds them,
for products whose result is too small to fill the device), staged stores of C (rows that
are not whole vec4s written through shared memory, neighbour by neighbour) and the unrolled
twin of either build (matmul_unrolled.comp, matmul_split_unrolled.comp). The plan depends on
the product's regime (`regime`: thin_k, small, medium, large) through DEVICE_PLANS, a table
per device class that benchmarks fill (payload/benchmarks/matmul_sweep.py measures every
candidate); GPULAB_MATMUL_VARIANT sets one plan for every regime, for tuning and the sweep.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpulab.vk import DeviceInfo

TILE_VARIABLE = "GPULAB_MATMUL_TILE"
VARIANT_VARIABLE = "GPULAB_MATMUL_VARIANT"
OUTPUTS = 8
"""Rows and columns of C per invocation (matmul.comp keeps 8 x 8 in registers)."""
_MAX_UNITS = 4  # matmul.comp's MAX_UNITS: loads per invocation and matrix per panel
MIN_WORKGROUPS = 256
"""Below this many workgroups a GPU takes a smaller block (a few per multiprocessor)."""
_MIN_SMALL_INVOCATIONS = 64  # the smallest workgroup worth a smaller block on a GPU
SUBGROUP_TILING_INVOCATIONS = 512
"""Workgroups this large (and subgroups 32 wide) take subgroup tiling; see the module doc."""
_CPU_MAX_INVOCATIONS = 256  # lavapipe: 512^3 in 230 ms at 16x16x8, 330 ms at 32x16x8
_TILED_SUBGROUP = 32  # the subgroup width matmul.comp's patches of 8 x 4 invocations assume
_NVIDIA = 0x10DE


@dataclass(frozen=True)
class MatmulTile:
    """One shape of matmul.comp's workgroup."""

    threads_x: int
    threads_y: int
    depth: int
    subgroup_tiles: bool = False
    wide: bool = False
    """8 x 16 outputs per invocation instead of 8 x 8 (matmul_split.comp only; never chosen
    automatically: a plan names it, spelled with `w`)."""

    @property
    def block_rows(self) -> int:
        """Rows of C per workgroup."""
        return OUTPUTS * self.threads_y

    @property
    def block_cols(self) -> int:
        """Columns of C per workgroup."""
        return OUTPUTS * self.threads_x * (2 if self.wide else 1)

    @property
    def invocations(self) -> int:
        return self.threads_x * self.threads_y

    def workgroups(self, m: int, n: int) -> int:
        """Workgroups of an m x n result."""
        return -(-m // self.block_rows) * -(-n // self.block_cols)

    @property
    def shared_bytes(self) -> int:
        """Two panels of A (rows padded by one vec4) and of B, in vec4s of 16 bytes."""
        a_row, b_row = self.block_rows // 4 + 1, self.block_cols // 4
        return 2 * self.depth * (a_row + b_row) * 16

    @property
    def spelling(self) -> str:
        """XxYxD, with `s` appended when subgroup-tiled and `w` when wide (parse_plan reads it
        back)."""
        suffix = ("s" if self.subgroup_tiles else "") + ("w" if self.wide else "")
        return f"{self.threads_x}x{self.threads_y}x{self.depth}{suffix}"

    @property
    def specialization(self) -> tuple[tuple[int, int], ...]:
        return (
            (0, self.threads_x),
            (1, self.threads_y),
            (2, self.depth),
            (3, self.subgroup_tiles),
        )

    def split_specialization(self, staged: bool) -> tuple[tuple[int, int], ...]:
        """matmul_split.comp's constants: these, staged stores, the column groups."""
        return (*self.specialization, (4, staged), (5, 4 if self.wide else 2))

    def problem(self, info: DeviceInfo, *, staged: bool = False) -> str | None:
        """Why this shape does not fit `info`'s limits (None: it fits); `staged`: with
        matmul_split.comp's staged stores."""
        a_units = (self.block_rows // 4) * self.depth
        b_units = self.depth * (self.block_cols // 4)
        if self.depth % 4 or self.depth < 4:
            return f"depth {self.depth} is not a positive multiple of 4"
        if max(a_units, b_units) > _MAX_UNITS * self.invocations:
            return "too few invocations to load a panel"
        allowed = info.max_workgroup_invocations
        if self.invocations > allowed:
            return f"{self.invocations} invocations, the device allows {allowed}"
        width, height, _ = info.max_workgroup_size
        if self.threads_x > width or self.threads_y > height:
            return f"a {self.threads_x}x{self.threads_y} workgroup exceeds the device's sizes"
        if self.shared_bytes > info.max_shared_memory_bytes:
            return (
                f"{self.shared_bytes} bytes of shared memory, the device has "
                f"{info.max_shared_memory_bytes}"
            )
        if staged and self.threads_y > 2 * self.depth:
            # a row of C per invocation (threads_y x block_cols floats) fills B's two panels
            return f"staged stores need threads_y <= 2 depth, got {self.threads_y}"
        return None


CANDIDATES = tuple(
    MatmulTile(x, y, depth)
    for x, y, depth in (
        (32, 16, 8),
        (16, 16, 8),
        (16, 8, 8),
        (8, 8, 8),
        (8, 8, 4),
        (4, 4, 4),
        (2, 2, 4),
    )
)
"""Largest first; the last fits every Vulkan device (4 invocations, 1152 bytes). 32x16x8 is a
128 x 256 block of 512 invocations (24 KiB of shared memory): 42.6 TFLOP/s at 4096^3 on the
H200 where 16x16x8 ran at 38.9 with the same kernel (4 Dec 2026, docs/benchmarks.md). No
16-deep panel: 16x16x16 needs 130 registers on the H200, which leaves one workgroup per
multiprocessor (32.0 TFLOP/s); GPULAB_MATMUL_TILE=16x16x16 still picks it."""


def with_subgroup_tiling(tile: MatmulTile, info: DeviceInfo) -> MatmulTile:
    """`tile` with subgroup tiling on where the module doc says it pays."""
    wanted = (
        tile.invocations >= SUBGROUP_TILING_INVOCATIONS
        and info.subgroup_size == _TILED_SUBGROUP
        and tile.threads_x % 8 == 0
        and tile.threads_y % 4 == 0
    )
    return dataclasses.replace(tile, subgroup_tiles=wanted)


def parse_tile(text: str) -> MatmulTile:
    """XxYxD as GPULAB_MATMUL_TILE spells it."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(f"{TILE_VARIABLE}={text!r}: expected XxYxD, for example 16x16x8")
    x, y, depth = (int(part) for part in parts)
    return MatmulTile(x, y, depth)


def choose_tiles(info: DeviceInfo) -> tuple[MatmulTile, ...]:
    """The shapes for `info`, largest block first: the largest candidate that fits, a whole
    number of subgroups where one does, then on a GPU the smaller blocks for small products
    (see tile_for). GPULAB_MATMUL_TILE alone when set (ValueError when it does not fit)."""
    wanted = os.environ.get(TILE_VARIABLE)
    if wanted:
        tile = parse_tile(wanted)
        problem = tile.problem(info)
        if problem is not None:
            raise ValueError(f"{TILE_VARIABLE}={wanted}: does not fit {info.name}: {problem}")
        return (with_subgroup_tiling(tile, info),)
    subgroup = max(info.subgroup_size, 1)
    fitting = [
        tile
        for tile in CANDIDATES
        if tile.problem(info) is None
        and (info.type != "cpu" or tile.invocations <= _CPU_MAX_INVOCATIONS)
    ]
    whole = [tile for tile in fitting if tile.invocations % subgroup == 0]
    chosen = [(whole or fitting)[0]]
    if info.type != "cpu":
        for tile in whole:
            last = chosen[-1]
            smaller = tile.block_rows * tile.block_cols < last.block_rows * last.block_cols
            if smaller and tile.invocations >= _MIN_SMALL_INVOCATIONS:
                chosen.append(tile)
    return tuple(with_subgroup_tiling(tile, info) for tile in chosen)


def tile_for(tiles: Sequence[MatmulTile], m: int, n: int, slices: int = 1) -> MatmulTile:
    """The first of `tiles` that gives an m x n result MIN_WORKGROUPS workgroups (times
    `slices` of split-K), else the last (the smallest block)."""
    for tile in tiles:
        if tile.workgroups(m, n) * slices >= MIN_WORKGROUPS:
            return tile
    return tiles[-1]


@dataclass(frozen=True)
class MatmulPlan:
    """How one product runs: `tile` (None: tile_for's choice among the device's tiles),
    `split` slices of k (more than 1: matmul_split.comp into scratch, then matmul_sum.comp),
    `staged` stores of C (matmul_split.comp) and `unrolled`: the unrolled twin of the build
    (matmul_unrolled.comp or matmul_split_unrolled.comp: [[unroll]] on the loops over
    registers, panels two at a time; shaders/matmul.glsl says why)."""

    tile: MatmulTile | None = None
    split: int = 1
    staged: bool = False
    unrolled: bool = False

    @property
    def split_shader(self) -> bool:
        """Whether it runs the split build (split-K, staged stores or a wide tile: its push
        constants and specialization; else matmul.comp's, as before plans existed)."""
        wide = self.tile is not None and self.tile.wide
        return self.split > 1 or self.staged or wide

    @property
    def source(self) -> str:
        """The shader it runs: matmul, matmul_split, or their `_unrolled` twins."""
        build = "matmul_split" if self.split_shader else "matmul"
        return f"{build}_unrolled" if self.unrolled else build

    @property
    def spelling(self) -> str:
        """As GPULAB_MATMUL_VARIANT spells it (parse_plan reads it back)."""
        parts = [self.tile.spelling] if self.tile is not None else []
        parts += [f"split{self.split}"] if self.split > 1 else []
        parts += ["staged"] if self.staged else []
        parts += ["unrolled"] if self.unrolled else []
        return "+".join(parts) or "auto"

    def problem(self, info: DeviceInfo) -> str | None:
        """Why the plan's own tile does not fit `info` (None: it fits, or has no tile)."""
        return None if self.tile is None else self.tile.problem(info, staged=self.staged)


AUTO = MatmulPlan()
MAX_SPLIT = 16

_SPLIT = re.compile(r"split(\d+)")
_TILE = re.compile(r"(\d+)x(\d+)x(\d+)(s?)(w?)")


def parse_plan(text: str) -> MatmulPlan:
    """`auto`, or parts joined by `+`: a tile XxYxD (`s` appended: subgroup-tiled; then `w`:
    wide, 8 x 16 outputs per invocation), splitN
    (k in N slices, 1 to MAX_SPLIT), staged, unrolled; for example 16x16x8+split4,
    32x16x8s+staged, split2 (the tile chosen as for two slices), 16x16x8w+unrolled."""
    error = (
        f"matmul variant {text!r}: expected auto or parts joined by + (XxYxD[s][w], splitN, "
        "staged, unrolled), for example 16x16x8+split4"
    )
    parts = text.lower().split("+")
    if parts == ["auto"]:
        return AUTO
    plan = AUTO
    for part in parts:
        tile, split = _TILE.fullmatch(part), _SPLIT.fullmatch(part)
        if tile and plan.tile is None and min(int(tile.group(i)) for i in (1, 2, 3)) > 0:
            x, y, depth = (int(tile.group(i)) for i in (1, 2, 3))
            tiled, wide = tile.group(4) == "s", tile.group(5) == "w"
            plan = dataclasses.replace(plan, tile=MatmulTile(x, y, depth, tiled, wide))
        elif split and plan.split == 1 and 1 <= int(split.group(1)) <= MAX_SPLIT:
            plan = dataclasses.replace(plan, split=int(split.group(1)))
        elif part == "staged" and not plan.staged:
            plan = dataclasses.replace(plan, staged=True)
        elif part == "unrolled" and not plan.unrolled:
            plan = dataclasses.replace(plan, unrolled=True)
        else:
            raise ValueError(error)
    return plan


REGIMES = ("thin_k", "small", "medium", "large")
THIN_K = 64
"""k up to this is thin_k whatever m and n (4097x33x4095: writing C outweighs the work)."""
SMALL_OUTPUTS = 1536 * 1536
"""Results up to this many floats are small (1000^2, 1024^2: 64 blocks of 128 x 128)."""
MEDIUM_OUTPUTS = 3072 * 3072
"""Up to this, medium (2048^2: 256 blocks of 128 x 128); beyond, large (4096^2 and up)."""


def regime(m: int, k: int, n: int) -> str:
    """The regime (DEVICE_PLANS's row) of an m x k by k x n product."""
    if k <= THIN_K:
        return "thin_k"
    if m * n <= SMALL_OUTPUTS:
        return "small"
    return "medium" if m * n <= MEDIUM_OUTPUTS else "large"


DEVICE_PLANS: dict[str, dict[str, str]] = {
    # H100 sweeps of 6 and 7 Dec (docs/benchmarks.md), against the kernel before plans:
    # 1024^3 0.57x -> 0.89x cuBLAS, 1000^3 0.45x -> 0.79x, 2048^3 0.74x -> 0.87x, 4096^3 and
    # 8192^3 0.83x -> 0.87x (the unrolled builds with panels in pairs), 4097x33x4095 0.49x ->
    # 0.81x (staged stores).
    "nvidia": {
        "thin_k": "32x16x8+staged+unrolled",
        "small": "16x16x8+split2+unrolled",
        "medium": "32x16x8s+unrolled",
        "large": "32x16x8s+unrolled",
    },
}
"""Per device class (`device_class`), each regime's plan as GPULAB_MATMUL_VARIANT spells it; a
class or regime not here runs `auto` (matmul.comp with choose_tiles' and tile_for's tile).
Filled from payload/benchmarks/matmul_sweep.py's winners (docs/kernels.md says how)."""


def device_class(info: DeviceInfo) -> str:
    """DEVICE_PLANS's key for `info`: nvidia for NVIDIA GPUs, else other."""
    return "nvidia" if info.vendor_id == _NVIDIA and info.type != "cpu" else "other"


def choose_plans(info: DeviceInfo) -> dict[str, MatmulPlan]:
    """Each regime's plan for `info`: GPULAB_MATMUL_VARIANT for every regime when set, else
    DEVICE_PLANS. ValueError when a plan's tile does not fit the device."""
    wanted = os.environ.get(VARIANT_VARIABLE)
    table = DEVICE_PLANS.get(device_class(info), {})
    plans = {name: parse_plan(wanted or table.get(name, "auto")) for name in REGIMES}
    for plan in plans.values():
        problem = plan.problem(info)
        if problem is not None:
            where = VARIANT_VARIABLE if wanted else f"DEVICE_PLANS[{device_class(info)!r}]"
            raise ValueError(f"{where}: {plan.spelling} does not fit {info.name}: {problem}")
    return plans


def split_depth(k: int, split: int, depth: int) -> tuple[int, int]:
    """(depths per slice, slices) for k in about `split` slices, each a whole number of
    `depth`-deep panels, none empty."""
    chunk = -(-k // max(split, 1))
    chunk = -(-chunk // depth) * depth
    return chunk, -(-k // chunk)
