"""The same ops through torch or cupy on the same GPU, timed with CUDA events (bench --compare)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from gpulab.backends import BackendUnavailable
from gpulab.diagnostics.bench_ops import Workload, matrix_fields

TRIALS = 3
TARGET_SECONDS = 0.05
MAX_REPEAT = 200


class Library:
    """One array library on its CUDA device: makes the op's arrays and times it."""

    def __init__(self, name: str, module: Any) -> None:
        self.name = name
        self.module = module
        if name == "torch":
            if not module.cuda.is_available():
                raise BackendUnavailable("--compare torch: torch sees no CUDA device")
            # The fp32 matmul we compare with is true fp32, not TF32.
            module.backends.cuda.matmul.allow_tf32 = False
            module.backends.cudnn.allow_tf32 = False
            self.version = f"torch {module.__version__}"
        else:
            if module.cuda.runtime.getDeviceCount() == 0:
                raise BackendUnavailable("--compare cupy: cupy sees no CUDA device")
            self.version = f"cupy {module.__version__}"

    def _array(self, shape: tuple[int, ...], value: float) -> Any:
        if self.name == "torch":
            return self.module.full(shape, value, dtype=self.module.float32, device="cuda")
        return self.module.full(shape, value, dtype=self.module.float32)

    def _synchronize(self) -> None:
        if self.name == "torch":
            self.module.cuda.synchronize()
        else:
            self.module.cuda.Device().synchronize()

    def _elapsed(self, run: Callable[[], Any], repeat: int) -> float:
        """Seconds per call of `repeat` back-to-back calls, by CUDA events."""
        if self.name == "torch":
            start = self.module.cuda.Event(enable_timing=True)
            end = self.module.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeat):
                run()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) * 1e-3 / repeat
        cuda = self.module.cuda
        start, end = cuda.Event(), cuda.Event()
        start.record()
        for _ in range(repeat):
            run()
        end.record()
        end.synchronize()
        return float(cuda.get_elapsed_time(start, end)) * 1e-3 / repeat

    def _operation(self, workload: Workload) -> Callable[[], Any]:
        """The op's entry's way of running it in this library, on arrays of bench's shapes."""
        compare = workload.bench.compare
        if compare is None:
            raise BackendUnavailable(f"--compare {self.name}: {workload.op} has no equivalent")
        arrays = {
            name: (self._array(*value) if isinstance(value, tuple) else value)
            for name, value in workload.inputs.items()
        }
        shape = workload.out_shape
        if shape:
            arrays["out"] = self._array(shape, 0.0)
        return compare(self.module, self.name == "torch", arrays)

    def measure(self, workload: Workload) -> dict[str, Any]:
        """One row for `workload`: the best of TRIALS timed batches."""
        run = self._operation(workload)
        run()
        self._synchronize()
        single = self._elapsed(run, 1)
        repeat = max(1, min(MAX_REPEAT, int(TARGET_SECONDS / max(single, 1e-6))))
        seconds = min(self._elapsed(run, repeat) for _ in range(TRIALS))
        del run
        self._release()
        row: dict[str, Any] = {
            "op": workload.op,
            "n": workload.n,
            "backend": self.name,
            "gbps": workload.bytes_moved / seconds / 1e9,
            "time_ms": seconds * 1e3,
            "bytes": workload.bytes_moved,
            "library": self.version,
            "repeat": repeat,
        }
        if workload.matrix:
            row |= matrix_fields(workload, seconds)
        return row

    def _release(self) -> None:
        if self.name == "torch":
            self.module.cuda.empty_cache()
        else:
            self.module.get_default_memory_pool().free_all_blocks()


def load_library(name: str) -> Library:
    """torch or cupy, ready on its GPU; BackendUnavailable when it cannot run here."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        raise BackendUnavailable(f"--compare {name}: {name} is not installed here") from None
    try:
        return Library(name, module)
    except BackendUnavailable:
        raise
    except Exception as exc:
        raise BackendUnavailable(f"--compare {name}: {exc}") from None
