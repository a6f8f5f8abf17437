"""matmul's register-blocked kernel: the tile chosen per device, and exact results for every
tile shape at shapes that are not multiples of it (edges, vec4 and scalar loads)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from gpulab.kernels import Kernels, matmul_tiles
from gpulab.kernels.matmul_tiles import (
    CANDIDATES,
    TILE_VARIABLE,
    MatmulTile,
    choose_tiles,
    tile_for,
)
from gpulab.ops import reference, tolerance
from gpulab.vk import Device, DeviceInfo

SHAPES = [(1, 1, 1), (3, 5, 7), (33, 7, 65), (67, 64, 68), (130, 17, 129), (128, 128, 128)]
"""(m, k, n): single elements, k not a multiple of 4 (scalar loads of A), n not a multiple
of 4 (scalar loads of B and stores of C), partial blocks and panels, and whole blocks."""


def _limits(
    info: DeviceInfo, shared: int, invocations: int, subgroup: int, kind: str = "cpu"
) -> DeviceInfo:
    return dataclasses.replace(
        info,
        type=kind,
        max_shared_memory_bytes=shared,
        max_workgroup_invocations=invocations,
        max_workgroup_size=(invocations, invocations, 64),
        subgroup_size=subgroup,
    )


@pytest.mark.parametrize(
    ("kind", "shared", "invocations", "subgroup", "expected"),
    [
        # NVIDIA discrete and Jetson Orin: 128 x 256 blocks, subgroup-tiled
        ("discrete", 49152, 1024, 32, MatmulTile(32, 16, 8, subgroup_tiles=True)),
        ("cpu", 32768, 1024, 8, MatmulTile(16, 16, 8)),  # lavapipe: at most 256 invocations
        ("discrete", 16384, 128, 32, MatmulTile(16, 8, 8)),  # Vulkan's required minimum
        ("discrete", 65536, 1024, 64, MatmulTile(32, 16, 8)),  # 64-wide subgroups: not tiled
    ],
)
def test_the_largest_tile_that_fits_the_device(
    device: Device, kind: str, shared: int, invocations: int, subgroup: int, expected: MatmulTile
) -> None:
    info = _limits(device.info, shared, invocations, subgroup, kind=kind)
    assert choose_tiles(info)[0] == expected
    assert expected.shared_bytes <= shared


def test_a_gpu_takes_smaller_blocks_for_small_products(device: Device) -> None:
    tiles = choose_tiles(_limits(device.info, 49152, 1024, 32, kind="discrete"))
    largest = MatmulTile(32, 16, 8, subgroup_tiles=True)
    assert tiles == (largest, MatmulTile(16, 16, 8), MatmulTile(16, 8, 8), MatmulTile(8, 8, 8))
    assert tile_for(tiles, 4096, 4096) == largest  # 512 workgroups
    assert tile_for(tiles, 2048, 4096) == largest  # 256
    assert tile_for(tiles, 2048, 2048) == MatmulTile(16, 16, 8)  # 256 of 128 x 128
    assert tile_for(tiles, 4097, 4095) == largest  # 33 x 16
    assert tile_for(tiles, 2048, 1024) == MatmulTile(16, 8, 8)  # 32 x 8 of 64 x 128
    assert tile_for(tiles, 1024, 1024) == MatmulTile(8, 8, 8)  # 256 of 64 x 64
    assert tile_for(tiles, 10, 10) == MatmulTile(8, 8, 8)


def test_the_smallest_candidate_fits_any_vulkan_device(device: Device) -> None:
    assert CANDIDATES[-1].problem(_limits(device.info, 16384, 128, 128)) is None


def test_a_tile_by_hand_must_fit(device: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TILE_VARIABLE, "8x4x8")
    assert choose_tiles(_limits(device.info, 49152, 1024, 32, "discrete")) == (MatmulTile(8, 4, 8),)
    monkeypatch.setenv(TILE_VARIABLE, "16x16x32")
    with pytest.raises(ValueError, match="bytes of shared memory"):
        choose_tiles(device.info)
    monkeypatch.setenv(TILE_VARIABLE, "16x16")
    with pytest.raises(ValueError, match="expected XxYxD"):
        choose_tiles(device.info)


@pytest.mark.parametrize("tile", [None, "32x16x8", "32x16x8 subgroup-tiled", "4x8x8", "2x2x4"])
def test_every_tile_is_exact_at_awkward_shapes(
    device: Device, monkeypatch: pytest.MonkeyPatch, tile: str | None
) -> None:
    if tile is not None:
        shape, _, tiled = tile.partition(" ")
        monkeypatch.setenv(TILE_VARIABLE, shape)
        if tiled:  # the permutation of invocations is exact whatever the real subgroup width
            monkeypatch.setattr(matmul_tiles, "_TILED_SUBGROUP", device.info.subgroup_size)
    rng = np.random.default_rng(17)
    with Kernels(device) as kernels:
        for m, k, n in SHAPES:
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            got = kernels.run("matmul", A=a, B=b)
            inputs = {"A": a, "B": b}
            outcome = tolerance.compare("matmul", got, reference.matmul(a, b), inputs, {})
            assert outcome.ok, ((m, k, n), tile, outcome)
