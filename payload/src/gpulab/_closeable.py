"""`Closeable`: one base for everything in gpulab that holds a resource until `close()`.

Vulkan objects, the memory layer's pools and stagers, the backends' executors and runner,
the native suballocator and the SSH transport all release what they hold the same way: a
`close()` that a second call leaves alone, and `with` that calls it on the way out.
"""

from __future__ import annotations

import abc
from typing import TypeVar

Self = TypeVar("Self", bound="Closeable")


class Closeable(abc.ABC):
    """Holds something until close(); `with` closes it on leaving the block."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what is held. A second call does nothing."""

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
