"""Host backends that run one node at a time on numpy arrays: `cpu` and `native`."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from gpulab._shown import shown
from gpulab.backends.base import FloatArray, OperationExecutor, Segment, SegmentRun, Values
from gpulab.backends.errors import BackendUnavailable, ExecutionFailed
from gpulab.graph import Literal, Node
from gpulab.native import NativeUnavailable
from gpulab.native import kernels as native_kernels
from gpulab.ops import NumericalError, reference
from gpulab.ops.entry import NoHostRun, resolve
from gpulab.ops.registry import entry, find
from gpulab.ops.solver import SolverReport

if TYPE_CHECKING:
    from gpulab.backends.base import Made


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo, or what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class EagerExecutor(OperationExecutor):
    """Runs each node on host arrays by calling the function its op's entry names in `field`
    ("reference" or "native") with (**inputs, **params); `module` has the helpers an entry's
    `host` asks for (jacobi_step)."""

    def __init__(self, name: str, module: ModuleType, driver: str, field: str) -> None:
        self.name = name
        self._module = module
        self._driver = driver
        self._field = field
        self._functions: dict[str, Callable[..., Any]] = {}

    @property
    def device(self) -> dict[str, Any]:
        # arch: the interpreter's machine (platform.machine()), what the native library must
        # be built for; the model name alone may be the host's under qemu-user.
        return {
            "name": cpu_name(),
            "type": "cpu",
            "driver": self._driver,
            "arch": platform.machine(),
        }

    def kernel(self, op: str) -> Callable[..., Any]:
        """The function that runs `op` (or the helper of that name) on host arrays."""
        function = self._functions.get(op)
        if function is None:
            found = find(op)
            if found is None:
                function = getattr(self._module, op)
            else:
                path: str | None = getattr(found, self._field)
                if path is None:
                    raise ExecutionFailed(f"the {self.name} backend cannot run op {op!r}")
                function = resolve(path)
            self._functions[op] = function
        return function

    def _call(
        self, node: Node, values: Mapping[str, FloatArray]
    ) -> tuple[FloatArray, SolverReport | None]:
        """The node's value, and how a solve went (for an op whose entry reports one)."""
        arguments: dict[str, Any] = {
            name: (arg.value if isinstance(arg, Literal) else values[arg.name])
            for name, arg in node.inputs.items()
        }
        arguments.update(node.params)
        try:
            # The op's entry says how: its function, or (jacobi) a step under a shared loop.
            result, report = entry(node.op).host_call(self.kernel, arguments)
        except MemoryError as exc:
            raise ExecutionFailed(f"node {shown(node.id)} ({node.op}): out of host memory") from exc
        except NoHostRun as exc:
            raise BackendUnavailable(f"node {shown(node.id)} ({node.op}): {exc}") from exc
        return np.asarray(result, dtype=np.float32), report

    def close(self) -> None:
        """Nothing to release: host arrays go with their last reference."""

    def execute(self, segment: Segment, values: Values, made: Made = None) -> SegmentRun:
        # `made` stays empty: a host executor generates nothing (see cannot_generate).
        live = {name: values[name] for name in segment.reads}
        times: dict[str, float] = {}
        solvers: dict[str, SolverReport] = {}
        for node in segment.nodes:
            start = time.perf_counter()
            live[node.id], report = self._call(node, live)
            times[node.id] = (time.perf_counter() - start) * 1e3
            if report is not None:
                solvers[node.id] = report
            for name in segment.releases.get(node.id, ()):
                if name not in segment.exports:
                    live.pop(name, None)
        exports = {name: live[name] for name in segment.exports}
        return SegmentRun(exports, times, solvers=solvers)


class NativeExecutor(EagerExecutor):
    """The C kernels of gpulab.native; a zero-norm normalize is a NumericalError as on cpu."""

    def __init__(self) -> None:
        try:
            library = native_kernels.library()
        except NativeUnavailable as exc:
            raise BackendUnavailable(f"the native backend is unavailable: {exc}") from exc
        super().__init__(
            "native", native_kernels, f"gpulab_kernels ({library.path.name})", "native"
        )

    def _call(
        self, node: Node, values: Mapping[str, FloatArray]
    ) -> tuple[FloatArray, SolverReport | None]:
        try:
            return super()._call(node, values)
        except ValueError as exc:
            if entry(node.op).host_errors_are_numerical:
                raise NumericalError(str(exc)) from exc
            raise ExecutionFailed(f"node {shown(node.id)} ({node.op}): {exc}") from exc


def cpu_executor() -> EagerExecutor:
    """The numpy reference backend."""
    return EagerExecutor("cpu", reference, f"numpy {np.__version__}", "reference")
