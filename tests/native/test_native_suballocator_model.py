"""A hypothesis state machine drives the native allocator and a pure-Python model of free
regions side by side: every allocation is aligned and inside a free region of the model (so
nothing overlaps), a request fails only when no free region of the model can hold it, the
statistics match the model after every step, and freeing everything merges back one region."""

from __future__ import annotations

from gpulab.native.suballocator import OutOfSpace, Suballocator
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule


def align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


class FreeRegions:
    """Free space as sorted, maximal (start, end) intervals."""

    def __init__(self, capacity: int) -> None:
        self.regions = [(0, capacity)]

    def fits(self, size: int, alignment: int) -> bool:
        return any(align_up(s, alignment) + size <= e for s, e in self.regions)

    def carve(self, offset: int, size: int) -> None:
        for i, (s, e) in enumerate(self.regions):
            if s <= offset and offset + size <= e:
                pieces = [(s, offset), (offset + size, e)]
                self.regions[i : i + 1] = [(a, b) for a, b in pieces if b > a]
                return
        raise AssertionError(f"[{offset}, {offset + size}) is not inside one free region")

    def release(self, offset: int, size: int) -> None:
        merged = sorted([*self.regions, (offset, offset + size)])
        self.regions = []
        for s, e in merged:
            if self.regions and self.regions[-1][1] == s:
                self.regions[-1] = (self.regions[-1][0], e)
            else:
                self.regions.append((s, e))


class AllocatorMatchesModel(RuleBasedStateMachine):
    allocator: Suballocator
    model: FreeRegions

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, int] = {}

    @initialize(capacity=st.integers(1, 1 << 16))
    def create(self, capacity: int) -> None:
        self.capacity = capacity
        self.allocator = Suballocator(capacity)
        self.model = FreeRegions(capacity)

    @rule(size=st.integers(1, 1 << 14), alignment_log2=st.integers(0, 12))
    def allocate(self, size: int, alignment_log2: int) -> None:
        alignment = 1 << alignment_log2
        try:
            offset = self.allocator.allocate(size, alignment)
        except OutOfSpace:
            assert not self.model.fits(size, alignment)
            return
        assert offset % alignment == 0
        self.model.carve(offset, size)  # fails if it overlaps a live allocation
        self.live[offset] = size

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        offset = data.draw(st.sampled_from(sorted(self.live)))
        self.allocator.free(offset)
        self.model.release(offset, self.live.pop(offset))

    @rule()
    def reset(self) -> None:
        self.allocator.reset()
        self.live.clear()
        self.model = FreeRegions(self.capacity)

    @invariant()
    def statistics_match_the_model(self) -> None:
        stats = self.allocator.stats()
        used = sum(self.live.values())
        sizes = [e - s for s, e in self.model.regions]
        assert stats.capacity == self.capacity
        assert (stats.used, stats.free) == (used, self.capacity - used)
        assert stats.allocation_count == len(self.live)
        assert stats.free_region_count == len(sizes)
        assert stats.largest_free_region == max(sizes, default=0)

    def teardown(self) -> None:
        for offset in list(self.live):
            self.allocator.free(offset)
        stats = self.allocator.stats()
        assert (stats.free_region_count, stats.largest_free_region) == (1, self.capacity)
        self.allocator.close()


AllocatorMatchesModel.TestCase.settings = settings(
    max_examples=150, stateful_step_count=60, deadline=None
)
TestAllocatorMatchesModel = AllocatorMatchesModel.TestCase
