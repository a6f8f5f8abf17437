"""matmul's register-blocked kernel: the tile chosen per device, and exact results for every
tile shape at shapes that are not multiples of it (edges, vec4 and scalar loads); the plans
(split-K, staged stores) per shape regime, and exact results for each."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from gpulab.kernels import DeviceArray, Input, Kernels, OwnedArray, matmul_tiles
from gpulab.kernels.matmul_tiles import (
    CANDIDATES,
    DEVICE_PLANS,
    REGIMES,
    TILE_VARIABLE,
    VARIANT_VARIABLE,
    MatmulPlan,
    MatmulTile,
    choose_plans,
    choose_tiles,
    parse_plan,
    regime,
    split_depth,
    tile_for,
)
from gpulab.ops import reference, tolerance
from gpulab.vk import CommandPool, Device, DeviceInfo

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


PLAN_SHAPES = [*SHAPES, (33, 17, 65), (257, 33, 255), (130, 100, 129), (67, 200, 36)]
"""SHAPES, and: 4097x33x4095 scaled down (thin k, n odd), k over several slices with a short
last slice, n a multiple of 4 but not of the block."""


@pytest.mark.parametrize(
    "variant",
    [
        "auto",
        "16x16x8+split4",
        "8x8x8+split3",
        "split2",
        "staged",
        "32x16x8s+staged",
        "16x8x8+split16+staged",
        "8x16x8+staged",
        "2x2x4+split2+staged",
        "16x16x8w",
        "8x16x8w+split2+staged",
        "8x8x8sw+split3",
        "unrolled",
        "32x16x8s+unrolled",
        "16x16x8+split2+unrolled",
        "16x16x8w+unrolled",
        "8x16x8w+split2+staged+unrolled",
        "32x16x8s+staged+unrolled",
    ],
)
def test_every_plan_is_exact_at_awkward_shapes(
    device: Device, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    monkeypatch.setenv(VARIANT_VARIABLE, variant)
    rng = np.random.default_rng(50)
    with Kernels(device) as kernels:
        for m, k, n in PLAN_SHAPES:
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            got = kernels.run("matmul", A=a, B=b)
            inputs = {"A": a, "B": b}
            outcome = tolerance.compare("matmul", got, reference.matmul(a, b), inputs, {})
            assert outcome.ok, ((m, k, n), variant, outcome)


def test_split_k_adds_one_dispatch_and_needs_scratch(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VARIANT_VARIABLE, "16x16x8+split4")
    arrays: list[OwnedArray] = []

    def scratch(nbytes: int) -> DeviceArray:
        arrays.append(OwnedArray(device, (-(-nbytes // 4),), mappable=False))
        return arrays[-1].array

    with Kernels(device) as kernels, CommandPool(device) as pool:
        a, b, out = (scratch(4 * 64 * 128), scratch(4 * 128 * 64), scratch(4 * 64 * 64))
        inputs: dict[str, Input] = {
            "A": DeviceArray(a.buffer, (64, 128)),
            "B": DeviceArray(b.buffer, (128, 64)),
        }
        result = DeviceArray(out.buffer, (64, 64))
        cmd = pool.allocate()
        cmd.begin()
        split = kernels.record(cmd, "matmul", inputs, result, scratch=scratch)
        alone = kernels.record(cmd, "matmul", inputs, result)  # no scratch: one slice
        cmd.end()
        assert (split.dispatches, alone.dispatches) == (2, 1)
        assert arrays[3].array.size == 4 * 64 * 64  # four slices of 32 depths
    for array in arrays:
        array.close()


def test_plans_parse_and_spell_back() -> None:
    plan = parse_plan("16x16x8s+split4+staged")
    assert plan == MatmulPlan(MatmulTile(16, 16, 8, subgroup_tiles=True), 4, staged=True)
    spellings = ("auto", "16x16x8", "split2", "staged", "32x16x8s+split3+staged", "8x8x8sw")
    for spelling in (*spellings, "16x16x8w+split2+staged+unrolled", "unrolled"):
        assert parse_plan(spelling).spelling == spelling
    sources = {
        "auto": "matmul",
        "32x16x8s+unrolled": "matmul_unrolled",
        "16x16x8w": "matmul_split",
        "split2+unrolled": "matmul_split_unrolled",
        "32x16x8+staged+unrolled": "matmul_split_unrolled",
    }
    for spelling, source in sources.items():
        assert parse_plan(spelling).source == source
    wrong_ones = (
        "",
        "fast",
        "16x16",
        "16x16x8ws",
        "split0",
        "split17",
        "auto+split2",
        "split2+split3",
        "unrolled+unrolled",
    )
    for wrong in wrong_ones:
        with pytest.raises(ValueError, match="expected auto or parts joined by"):
            parse_plan(wrong)


def test_regimes_and_slices() -> None:
    assert regime(4097, 33, 4095) == "thin_k"
    assert regime(1000, 1000, 1000) == regime(1024, 1024, 1024) == "small"
    assert regime(2048, 2048, 2048) == "medium"
    assert regime(4096, 4096, 4096) == regime(8192, 8192, 8192) == "large"
    assert split_depth(1024, 4, 8) == (256, 4)
    assert split_depth(1000, 4, 8) == (256, 4)  # the last slice 232 deep
    assert split_depth(100, 16, 8) == (8, 13)  # never an empty slice
    assert split_depth(5, 4, 8) == (8, 1)


def test_plans_come_from_the_table_or_the_variable(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvidia = dataclasses.replace(
        _limits(device.info, 49152, 1024, 32, kind="discrete"), vendor_id=0x10DE
    )
    monkeypatch.setitem(DEVICE_PLANS, "nvidia", {"small": "16x16x8+split4"})
    plans = choose_plans(nvidia)
    assert plans["small"] == MatmulPlan(MatmulTile(16, 16, 8), 4)
    assert plans["large"] == MatmulPlan()
    other = dataclasses.replace(nvidia, vendor_id=0x1002)
    assert set(choose_plans(other).values()) == {MatmulPlan()}  # not in the table: auto
    monkeypatch.setenv(VARIANT_VARIABLE, "staged")
    assert set(choose_plans(nvidia).values()) == {MatmulPlan(staged=True)}
    # staged stores put each invocation's row of C in B's two panels
    monkeypatch.setenv(VARIANT_VARIABLE, "8x32x8+staged")
    with pytest.raises(ValueError, match="staged stores need threads_y <= 2 depth, got 32"):
        choose_plans(nvidia)


def test_wide_tiles_run_the_split_build_with_twice_the_columns() -> None:
    plan = parse_plan("16x16x8w")
    assert plan.tile is not None and plan.split_shader
    assert (plan.tile.block_rows, plan.tile.block_cols) == (128, 256)
    assert plan.tile.split_specialization(staged=False)[-2:] == ((4, False), (5, 4))
    assert not parse_plan("16x16x8").split_shader


def test_every_table_entry_is_a_plan_of_a_regime(device: Device) -> None:
    h100 = dataclasses.replace(
        _limits(device.info, 49152, 1024, 32, kind="discrete"), vendor_id=0x10DE
    )
    for plans in DEVICE_PLANS.values():
        assert set(plans) <= set(REGIMES)
        for spelling in plans.values():
            assert parse_plan(spelling).problem(h100) is None, spelling
