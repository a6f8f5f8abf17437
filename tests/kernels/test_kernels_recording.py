"""The recording API: device-resident chains, jacobi's convergence state, errors, cleanup."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from gpulab.kernels import DeviceArray, Kernels, OwnedArray
from gpulab.ops import reference
from gpulab.vk import CommandBuffer, CommandPool, Device, Fence, live_handles


class Session:
    """Owned arrays, a scratch callback and one command buffer, for recording by hand."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.owned: list[OwnedArray] = []
        self.pool = CommandPool(device)
        self.cmd: CommandBuffer = self.pool.allocate()

    def array(self, values: np.ndarray) -> DeviceArray:
        created = OwnedArray(self.device, values.shape)
        created.write(values)
        self.owned.append(created)
        return created.array

    def empty(self, shape: tuple[int, ...]) -> OwnedArray:
        created = OwnedArray(self.device, shape)
        self.owned.append(created)
        return created

    def scratch(self, nbytes: int) -> DeviceArray:
        return self.empty((max(1, -(-nbytes // 4)),)).array

    def submit(self) -> None:
        self.cmd.barrier("compute", "host")
        self.cmd.end()
        with Fence(self.device) as fence:
            self.device.submit(self.cmd, fence)
            fence.wait()

    def close(self) -> None:
        self.pool.close()
        for created in self.owned:
            created.close()


@pytest.fixture
def session(device: Device) -> Iterator[Session]:
    created = Session(device)
    yield created
    created.close()


def _system(n: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    a[np.diag_indices(n)] = np.abs(a).sum(axis=1) * 2
    return a, rng.uniform(-1, 1, n).astype(np.float32)


def _steps_until(a: np.ndarray, b: np.ndarray, iterations: int, tolerance: float) -> int:
    x = np.zeros_like(b)
    for step in range(1, iterations + 1):
        x, update = reference.jacobi_step(a, b, x)
        if update < tolerance:
            return step
    return iterations


def test_a_device_scalar_feeds_the_next_op(kernels: Kernels, session: Session) -> None:
    """sum -> scale and l2_norm -> saxpy in one submission: the scalar never leaves the GPU."""
    x = np.linspace(-1, 2, 1001, dtype=np.float32)
    y = np.ones(1001, dtype=np.float32)
    dx, dy = session.array(x), session.array(y)
    total, norm = session.empty(()), session.empty(())
    scaled, shifted = session.empty((1001,)), session.empty((1001,))
    session.cmd.begin()
    kernels.record(session.cmd, "sum", {"x": dx}, total.array, scratch=session.scratch)
    kernels.record(session.cmd, "scale", {"x": dx, "a": total.array}, scaled.array)
    kernels.record(session.cmd, "l2_norm", {"x": dx}, norm.array, scratch=session.scratch)
    kernels.record(session.cmd, "saxpy", {"a": norm.array, "x": dx, "y": dy}, shifted.array)
    session.submit()
    s, n = total.read(), norm.read()
    np.testing.assert_allclose(scaled.read(), s * x, rtol=1e-6)
    np.testing.assert_allclose(shifted.read(), n * x + y, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("check_every", [1, 3])
def test_jacobi_stops_at_the_tolerance_without_reading_x(
    kernels: Kernels, session: Session, check_every: int
) -> None:
    a, b = _system(67)
    iterations, tolerance = 60, 1e-4
    stop = _steps_until(a, b, iterations, tolerance)
    assert stop < iterations
    da, db = session.array(a), session.array(b)
    out = session.empty((67,))
    session.cmd.begin()
    params = {"iterations": iterations, "tolerance": tolerance, "check_every": check_every}
    recorded = kernels.record(
        session.cmd, "jacobi", {"A": da, "b": db}, out.array, params=params, scratch=session.scratch
    )
    session.submit()
    assert recorded.dispatches >= iterations  # every step recorded: one submission
    assert recorded.status is not None
    status = recorded.status.buffer.memory
    assert status is not None
    ran = int(status.read(np.uint32, 8, recorded.status.offset)[4])
    # Checked every k steps: it stops at the first check at or after the reference's stop.
    assert ran == -(-stop // check_every) * check_every
    expected = reference.jacobi(a, b, ran)
    np.testing.assert_allclose(out.read(), expected, rtol=1e-5, atol=1e-6)


def test_jacobi_without_a_tolerance_runs_every_step(kernels: Kernels, session: Session) -> None:
    a, b = _system(33)
    da, db = session.array(a), session.array(b)
    out = session.empty((33,))
    session.cmd.begin()
    recorded = kernels.record(
        session.cmd,
        "jacobi",
        {"A": da, "b": db},
        out.array,
        params={"iterations": 7},
        scratch=session.scratch,
    )
    session.submit()
    assert recorded.status is not None and recorded.status.buffer.memory is not None
    assert int(recorded.status.buffer.memory.read(np.uint32, 8, 0)[4]) == 7
    np.testing.assert_allclose(out.read(), reference.jacobi(a, b, 7), rtol=1e-5, atol=1e-6)


def test_jacobi_with_zero_iterations_is_zero(kernels: Kernels) -> None:
    a, b = _system(5)
    assert not np.any(kernels.run("jacobi", A=a, b=b, iterations=0))


def test_shape_errors_name_the_input(kernels: Kernels) -> None:
    with pytest.raises(ValueError, match="y"):
        kernels.run("add", x=np.ones(3, np.float32), y=np.ones(4, np.float32))
    with pytest.raises(ValueError, match="missing input 'y'"):
        kernels.run("dot", x=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="unknown op"):
        kernels.run("fft", x=np.ones(3, np.float32))


def test_out_of_the_wrong_shape_is_refused(kernels: Kernels, session: Session) -> None:
    x = session.array(np.ones(8, np.float32))
    session.cmd.begin()
    with pytest.raises(ValueError, match="out has shape"):
        kernels.record(session.cmd, "sum", {"x": x}, session.empty((8,)).array)
    with pytest.raises(ValueError, match="needs scratch"):
        kernels.record(
            session.cmd,
            "sum",
            {"x": session.array(np.ones(9999, np.float32))},
            session.empty(()).array,
        )
    session.cmd.end()


def test_a_matrix_beyond_one_binding_is_refused(device: Device, session: Session) -> None:
    with Kernels(device, max_binding_bytes=4096) as small:
        a = session.array(np.ones((40, 40), np.float32))
        x = session.array(np.ones(40, np.float32))
        session.cmd.begin()
        with pytest.raises(ValueError, match="input 'A' takes 6400 bytes"):
            small.record(session.cmd, "matvec", {"A": a, "x": x}, session.empty((40,)).array)
        session.cmd.end()


def test_a_misaligned_array_is_refused(kernels: Kernels, session: Session) -> None:
    owned = session.empty((16,))
    session.cmd.begin()
    with pytest.raises(ValueError, match="'x' starts at byte 4"):
        kernels.record(
            session.cmd,
            "scale",
            {"x": DeviceArray(owned.buffer, (3,), 4), "a": 2.0},
            session.empty((3,)).array,
        )
    session.cmd.end()


def test_device_array_bounds(device: Device) -> None:
    with OwnedArray(device, (4,)) as owned:
        with pytest.raises(ValueError, match="exceed"):
            DeviceArray(owned.buffer, (5,))
        assert DeviceArray(owned.buffer, (), 12).nbytes == 4


def test_kernels_close_releases_what_they_made(device: Device) -> None:
    before = live_handles()
    kernels = Kernels(device)
    kernels.run("sum", x=np.ones(70001, np.float32))
    kernels.run("matmul", A=np.ones((3, 3), np.float32), B=np.ones((3, 3), np.float32))
    assert live_handles() != before
    kernels.close()
    assert live_handles() == before
