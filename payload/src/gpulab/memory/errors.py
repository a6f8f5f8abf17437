"""The memory layer's errors: out of memory (with the numbers) and use after free."""

from __future__ import annotations


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.1f} MiB"


class OutOfMemoryError(MemoryError):
    """No suitable memory type could hold the request, even after releasing cached memory.

    `request` is the size asked for, `heap` the heap of the best suited memory type (where
    the request would have gone first), `usage` the bytes allocated from it and `limit` its
    size (or its configured limit), all in bytes.
    """

    def __init__(self, request: int, kind: str, heap: int, usage: int, limit: int) -> None:
        self.request = request
        self.kind = kind
        self.heap = heap
        self.usage = usage
        self.limit = limit
        super().__init__(
            f"out of device memory: {request} bytes ({_mib(request)}) of {kind} memory do not "
            f"fit in heap {heap} ({_mib(usage)} of {_mib(limit)} in use) or any other "
            "suitable memory type"
        )


class AllocationFreedError(RuntimeError):
    """An allocation was used after free() (or after its pool took it back)."""
