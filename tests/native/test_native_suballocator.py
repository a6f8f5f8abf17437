"""The Python owner of the native allocator: ownership of the handle (released exactly once,
unusable after close), and native errors and C++ exceptions arriving as Python exceptions."""

from __future__ import annotations

import gc
import threading

import pytest
from gpulab.native import _ffi, suballocator
from gpulab.native.suballocator import (
    HostOutOfMemory,
    InvalidArgument,
    OutOfSpace,
    Suballocator,
    SuballocatorClosed,
    SuballocatorError,
    UnknownOffset,
)


def test_close_releases_the_handle_once() -> None:
    before = suballocator.live_handles()
    allocator = Suballocator(1024)
    assert suballocator.live_handles() == before + 1
    allocator.close()
    assert suballocator.live_handles() == before
    allocator.close()  # a second close does nothing
    del allocator
    gc.collect()  # nor does the finalizer afterwards
    assert suballocator.live_handles() == before


def test_finalizer_releases_a_forgotten_allocator_once() -> None:
    before = suballocator.live_handles()
    allocator = Suballocator(1024)
    allocator.allocate(10)
    del allocator
    gc.collect()
    assert suballocator.live_handles() == before


def test_context_manager_closes() -> None:
    before = suballocator.live_handles()
    with Suballocator(1024) as allocator:
        assert allocator.allocate(100) == 0
        open_inside = not allocator.closed
    assert open_inside and allocator.closed
    assert suballocator.live_handles() == before


@pytest.mark.parametrize(
    "use",
    [
        lambda a: a.allocate(8),
        lambda a: a.free(0),
        lambda a: a.reset(),
        lambda a: a.stats(),
    ],
    ids=["allocate", "free", "reset", "stats"],
)
def test_use_after_close_raises(use: object) -> None:
    allocator = Suballocator(1024)
    allocator.close()
    assert callable(use)
    with pytest.raises(SuballocatorClosed, match="closed"):
        use(allocator)


def test_bad_requests_raise_typed_errors_with_the_native_message() -> None:
    with Suballocator(4096) as allocator:
        with pytest.raises(InvalidArgument, match=r"allocate\(0, alignment=1\): size must be"):
            allocator.allocate(0)
        with pytest.raises(InvalidArgument, match="power of two"):
            allocator.allocate(8, alignment=24)
        with pytest.raises(InvalidArgument, match="integer from 0 to 2"):
            allocator.allocate(-1)
        with pytest.raises(OutOfSpace, match="no free region fits 5000 bytes") as caught:
            allocator.allocate(5000)
        assert isinstance(caught.value, MemoryError)
        offset = allocator.allocate(64, alignment=64)
        allocator.free(offset)
        with pytest.raises(UnknownOffset, match="already freed"):
            allocator.free(offset)  # a double free is refused, not corrupting
        assert allocator.stats().free_region_count == 1


def test_capacity_is_validated() -> None:
    with pytest.raises(InvalidArgument, match="capacity must be 1 to 2\\^62"):
        Suballocator(0)
    with pytest.raises(InvalidArgument, match="capacity must be 1 to 2\\^62"):
        Suballocator(1 << 63)


@pytest.mark.parametrize(
    ("kind", "error_type", "message"),
    [
        (0, SuballocatorError, "std::runtime_error thrown on purpose"),
        (1, HostOutOfMemory, r"std::bad_alloc"),
        (2, SuballocatorError, "unknown C\\+\\+ exception"),
        (7, InvalidArgument, "kind must be 0, 1 or 2"),
    ],
)
def test_cpp_exceptions_become_python_exceptions(
    kind: int, error_type: type[SuballocatorError], message: str
) -> None:
    native = _ffi.load(_ffi.SUBALLOC)
    status = native.lib.gpulab_suballoc_debug_throw(kind)
    with pytest.raises(error_type, match=message):
        suballocator.raise_for_status(native, status, "debug_throw")
    with Suballocator(64) as allocator:  # the process and the library carry on
        assert allocator.allocate(64) == 0


def test_reset_frees_everything() -> None:
    with Suballocator(1000) as allocator:
        for _ in range(10):
            allocator.allocate(100)
        allocator.reset()
        stats = allocator.stats()
        assert (stats.used, stats.allocation_count, stats.largest_free_region) == (0, 0, 1000)
        assert allocator.allocate(1000) == 0


def test_threads_share_one_allocator() -> None:
    with Suballocator(1 << 20) as allocator:

        def churn() -> None:
            for _ in range(500):
                allocator.free(allocator.allocate(100, alignment=16))

        workers = [threading.Thread(target=churn) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert allocator.stats().used == 0
