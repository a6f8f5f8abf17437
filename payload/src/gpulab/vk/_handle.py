"""The base class of every owned Vulkan object: one release path, children before parents.

An object is released exactly once, by calling its `weakref.finalize`: `close()` calls it
explicitly (after closing the object's live children), garbage collection calls it as the
safety net, and a finalizer that has run does nothing the second time. The finalizer holds the
raw handles only, never the Python object, so it cannot keep the object alive.

A child holds its parent strongly and the parent holds its children weakly, so a parent is never
collected before its children.
"""

from __future__ import annotations

import enum
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

from gpulab._closeable import Closeable
from gpulab.vk.errors import ObjectClosedError

_live: Counter[str] = Counter()


def live_handles() -> dict[str, int]:
    """The number of live Vulkan objects of this process, by type (for leak tests)."""
    return {kind: count for kind, count in _live.items() if count}


class State(enum.Enum):
    """The lifecycle of an owned object."""

    OPEN = "open"
    CLOSED = "closed"


def _release(kind: str, destroy: Callable[[], object] | None) -> None:
    _live[kind] -= 1
    if destroy is not None:
        destroy()


class VkObject(Closeable):
    """An owned Vulkan object.

    Subclasses call `_own(raw, destroy, parent)` once the handle exists; `destroy` is a callable
    holding raw handles only (None for handles that the parent frees implicitly).
    """

    _raw: Any = None
    _state: State = State.CLOSED
    _finalizer: weakref.finalize[Any, Any] | None = None

    def _own(self, raw: Any, destroy: Callable[[], object] | None, parent: VkObject | None) -> None:
        kind = type(self).__name__
        self._raw = raw
        self._state = State.OPEN
        self._parent = parent
        self._children: dict[int, weakref.ref[VkObject]] = {}
        _live[kind] += 1
        self._finalizer = weakref.finalize(self, _release, kind, destroy)
        if parent is not None:
            parent._adopt(self)

    def _adopt(self, child: VkObject) -> None:
        key = id(child)
        children = self._children
        children[key] = weakref.ref(child, lambda _ref: children.pop(key, None))

    @property
    def state(self) -> State:
        """OPEN until close()."""
        return self._state

    @property
    def closed(self) -> bool:
        """Whether close() has run (directly or through the parent)."""
        return self._state is State.CLOSED

    @property
    def raw(self) -> Any:
        """The Vulkan handle; raises ObjectClosedError after close()."""
        if self._state is not State.OPEN:
            raise ObjectClosedError(f"{self!r} is used after close()")
        return self._raw

    def close(self) -> None:
        """Destroy the object, its live children first. A second call does nothing."""
        if self._state is not State.OPEN:
            return
        for ref in reversed(list(self._children.values())):
            child = ref()
            if child is not None:
                child.close()
        self._state = State.CLOSED
        self._raw = None
        if self._parent is not None:
            self._parent._children.pop(id(self), None)
        if self._finalizer is not None:
            self._finalizer()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._state.value}>"
