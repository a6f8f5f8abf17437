"""The result of a run and its JSON (the contract's result version 1), and writing it: the
target checked before the run, the JSON streamed and replaced atomically.

Names are imported on first use (PEP 562): the CLI checks `--output` without loading numpy.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes

if TYPE_CHECKING:
    from gpulab.results.result import Result
    from gpulab.results.result_file import (
        OutputFailed,
        OutputRefused,
        OutputTarget,
        output_target,
        prepare_output,
        write_result,
    )

__all__ = [
    "OutputFailed",
    "OutputRefused",
    "OutputTarget",
    "Result",
    "output_target",
    "prepare_output",
    "write_result",
]

_MODULES = {
    "result": ("Result",),
    "result_file": (
        "OutputFailed",
        "OutputRefused",
        "OutputTarget",
        "output_target",
        "prepare_output",
        "write_result",
    ),
}
__getattr__, __dir__ = lazy_attributes(
    __name__, {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}
)
