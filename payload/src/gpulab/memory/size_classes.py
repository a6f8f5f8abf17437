"""Size classes: the capacity a buffer of n bytes gets, so that released buffers serve the
next requests of about their size (BufferPool) and a graph's buffers can be allocated ahead
of their requests (gpulab.memory.ahead)."""

from __future__ import annotations

SMALLEST_CLASS = 256
EXACT_ABOVE = 256 << 20
PAGE = 4096


def size_class(nbytes: int) -> int:
    """The capacity that serves `nbytes`: a power of two split in four (at most 25% more),
    256 bytes at least; above 256 MiB the size rounded to a 4 KiB page."""
    if nbytes <= SMALLEST_CLASS:
        return SMALLEST_CLASS
    if nbytes > EXACT_ABOVE:
        return -(-nbytes // PAGE) * PAGE
    step = (1 << (nbytes.bit_length() - 1)) // 4
    return -(-nbytes // step) * step
