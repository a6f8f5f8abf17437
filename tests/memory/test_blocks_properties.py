"""Hypothesis drives the block allocator over fake memory: live regions of one block never
overlap, every offset meets its alignment, and freeing everything leaves one free region per
block and then, after the grace period, no blocks."""

from __future__ import annotations

import itertools

from gpulab.memory.blocks import Region
from gpulab.memory.errors import OutOfMemoryError
from gpulab.memory.offsets import FirstFitAllocator
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from .fakes import MIB, fake_blocks

sizes = st.one_of(st.integers(1, 8192), st.integers(8192, 3 * MIB))
alignments = st.sampled_from([1, 4, 16, 256, 4096, 65536])
kinds = st.sampled_from(["device", "upload", "readback"])


class BlockMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.blocks, self.made, self.clock = fake_blocks(
            heap_limits={0: 24 * MIB, 1: 12 * MIB}, grace_s=1.0
        )
        self.live: list[tuple[Region, int]] = []

    @rule(size=sizes, alignment=alignments, kind=kinds)
    def allocate(self, size: int, alignment: int, kind: str) -> None:
        try:
            region = self.blocks.allocate(size, alignment, kind, 0b1111)
        except OutOfMemoryError as error:
            assert error.request == size
            return
        assert region.offset % max(alignment, 64) == 0
        assert region.offset + region.size <= region.block.size
        self.live.append((region, alignment))

    @precondition(lambda self: self.live)
    @rule(pick=st.integers(0, 10_000))
    def free(self, pick: int) -> None:
        region, _ = self.live.pop(pick % len(self.live))
        self.blocks.free(region)

    @rule(seconds=st.floats(0.0, 2.0))
    def wait(self, seconds: float) -> None:
        self.clock.now += seconds
        self.blocks.release_expired()

    @rule()
    def free_everything(self) -> None:
        for region, _ in self.live:
            self.blocks.free(region)
        self.live.clear()
        for group in self.blocks.blocks.values():
            for block in group:
                assert isinstance(block.offsets, FirstFitAllocator)
                assert block.offsets.free_regions() == [(0, block.size)]
        self.clock.now += 1.5
        self.blocks.release_expired()
        assert self.blocks.stats()["block_count"] == 0
        assert all(memory.closed for memory in self.made)

    @invariant()
    def no_two_live_regions_overlap(self) -> None:
        spans = sorted((id(r.block), r.offset, r.offset + r.size) for r, _ in self.live)
        for (block_a, _, end_a), (block_b, start_b, _) in itertools.pairwise(spans):
            assert block_a != block_b or end_a <= start_b

    @invariant()
    def statistics_match_the_live_regions(self) -> None:
        stats = self.blocks.stats()
        assert stats["in_use_bytes"] == sum(r.size for r, _ in self.live)
        assert stats["allocation_count"] == len(self.live)
        assert stats["allocated_bytes"] == sum(m.size for m in self.made if not m.closed)
        assert not any(r.block.memory.closed for r, _ in self.live)  # type: ignore[attr-defined]


TestBlockMachine = BlockMachine.TestCase
TestBlockMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
