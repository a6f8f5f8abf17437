"""matmul's tile shape for one device: the specialization constants of shaders/matmul.comp.

A workgroup of threads_x x threads_y invocations computes an (8 threads_y) x (8 threads_x)
block of C, staging k in panels of `depth` through two shared buffers. The largest shape the
device's limits allow is taken (shared memory, invocations per workgroup and per dimension),
preferring a workgroup that is a whole number of subgroups. On a GPU, a product too small to
give that shape MIN_WORKGROUPS workgroups takes a smaller block instead (down to 64 x 64), so
that it still spreads over the device's multiprocessors; a CPU device keeps one shape (fewer
pipelines to compile). GPULAB_MATMUL_TILE=XxYxD (for example 16x16x8) picks the one shape by
hand, for tuning and tests; it must fit the device too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from gpulab.vk import DeviceInfo

TILE_VARIABLE = "GPULAB_MATMUL_TILE"
OUTPUTS = 8
"""Rows and columns of C per invocation (matmul.comp keeps 8 x 8 in registers)."""
_MAX_UNITS = 4  # matmul.comp's MAX_UNITS: loads per invocation and matrix per panel
MIN_WORKGROUPS = 256
"""Below this many workgroups a GPU takes a smaller block (a few per multiprocessor)."""
_MIN_SMALL_INVOCATIONS = 64  # the smallest workgroup worth a smaller block on a GPU


@dataclass(frozen=True)
class MatmulTile:
    """One shape of matmul.comp's workgroup."""

    threads_x: int
    threads_y: int
    depth: int

    @property
    def block_rows(self) -> int:
        """Rows of C per workgroup."""
        return OUTPUTS * self.threads_y

    @property
    def block_cols(self) -> int:
        """Columns of C per workgroup."""
        return OUTPUTS * self.threads_x

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
    def specialization(self) -> tuple[tuple[int, int], ...]:
        return ((0, self.threads_x), (1, self.threads_y), (2, self.depth))

    def problem(self, info: DeviceInfo) -> str | None:
        """Why this shape does not fit `info`'s limits (None: it fits)."""
        a_units = (self.block_rows // 4) * (self.depth // 4)
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
        return None


CANDIDATES = tuple(
    MatmulTile(x, y, depth)
    for x, y, depth in (
        (16, 16, 8),
        (16, 8, 8),
        (8, 8, 8),
        (8, 8, 4),
        (4, 4, 4),
        (2, 2, 4),
    )
)
"""Largest first; the last fits every Vulkan device (4 invocations, 1152 bytes). No 16-deep
panel: 16x16x16 (33 KiB of shared memory) ran at 26.4 TFLOP/s on the H200 where 16x16x8
(16 KiB, two workgroups per multiprocessor) ran at 40.5 (4096^3, one run, docs/benchmarks.md);
GPULAB_MATMUL_TILE=16x16x16 still picks it."""


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
        return (tile,)
    subgroup = max(info.subgroup_size, 1)
    fitting = [tile for tile in CANDIDATES if tile.problem(info) is None]
    whole = [tile for tile in fitting if tile.invocations % subgroup == 0]
    chosen = [(whole or fitting)[0]]
    if info.type == "cpu":
        return tuple(chosen)
    for tile in whole:
        smaller = tile.block_rows * tile.block_cols < chosen[-1].block_rows * chosen[-1].block_cols
        if smaller and tile.invocations >= _MIN_SMALL_INVOCATIONS:
            chosen.append(tile)
    return tuple(chosen)


def tile_for(tiles: Sequence[MatmulTile], m: int, n: int) -> MatmulTile:
    """The first of `tiles` that gives an m x n result MIN_WORKGROUPS workgroups, else the
    last (the smallest block)."""
    for tile in tiles:
        if tile.workgroups(m, n) >= MIN_WORKGROUPS:
            return tile
    return tiles[-1]
