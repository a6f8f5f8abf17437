"""Lazy attributes for package `__init__`s (PEP 562).

A public name's module is imported when the name is first used, so `import gpulab`, `gpulab
--help` and `gpulab validate` do not pay for numpy, the Vulkan binding or the kernels.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names live in the modules `where`
    maps them to (name: absolute module name)."""
    namespace = sys.modules[package].__dict__

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup finds it without coming here
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *where})

    return getattr_, dir_
