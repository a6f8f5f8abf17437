"""Stager on a real device (lavapipe here): both paths move the exact bytes, across chunk
boundaries, both ways; device memory the host cannot map always goes through the copy engine."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab.memory import FileRegion, MemoryManager, RegionReadError, Stager
from gpulab.memory.host_import import HostImporter
from gpulab.memory.path_choice import PROBE_BYTES
from gpulab.vk import Device
from gpulab.vk.commands import UPDATE_LIMIT

CHUNK = 1 << 16


@pytest.mark.parametrize(
    ("path", "threads", "readback_memory"),
    [
        ("staged", 1, "pinned"),
        ("staged", 3, "pinned"),
        ("staged", 3, "imported"),
        ("direct", 3, "pinned"),
    ],
)
def test_round_trip_across_chunks(
    device: Device, path: str, threads: int, readback_memory: str
) -> None:
    data = np.random.default_rng(1).standard_normal((37, 1001)).astype(np.float32)  # 2.3 chunks
    with (
        MemoryManager(device) as manager,
        Stager(
            manager,
            chunk_bytes=CHUNK,
            slots=2,
            threads=threads,
            paths={"upload": path, "download": path},
            threaded_from=0,
            readback_memory=readback_memory,
        ) as stager,
    ):
        # Mappable on every device: either path may serve it, and its mapping checks the upload.
        target = manager.allocate(data.nbytes + 12, kind="mapped")
        stager.upload(data, target)
        np.testing.assert_array_equal(target.read(np.float32, data.size), data.reshape(-1))
        back = stager.download(target, data.shape)
        np.testing.assert_array_equal(back, data)
        assert stager.counts["upload"][path] == stager.counts["download"][path] == 1
        if path == "staged":  # the readback went through the ring of that memory
            assert ("imported" in stager._rings) == (readback_memory == "imported")
        out = np.zeros(100, dtype=np.float32)
        assert stager.download(target, 100, out=out) is out
        np.testing.assert_array_equal(out, data.reshape(-1)[:100])
        target.free()


def test_large_copies_split_over_threads(device: Device) -> None:
    data = np.arange(3 << 20, dtype=np.uint8)
    with (
        MemoryManager(device) as manager,
        Stager(manager, threads=3, threaded_from=1 << 20) as stager,
    ):
        target = np.zeros_like(data)
        stager.copy(target, data)
        np.testing.assert_array_equal(target, data)
        assert stager._executor is not None  # started by the first large copy


def test_the_path_for_mappable_memory_is_measured(device: Device) -> None:
    data = np.ones(PROBE_BYTES // 4, dtype=np.float32)
    with MemoryManager(device) as manager, Stager(manager, chunk_bytes=CHUNK) as stager:
        target = manager.allocate(data.nbytes, kind="mapped")
        stager.upload(data, target)
        stager.download(target, data.shape)
        assert set(stager.paths) == {"upload", "download"}
        assert set(stager.measurements["upload"]) == {"direct", "staged"}
        assert stager.paths["upload"] in {"direct", "staged"}
        target.free()


def test_a_short_run_starts_no_threads_and_stages_only_what_it_moves(device: Device) -> None:
    data = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: below the probe and the threads
    with MemoryManager(device) as manager, Stager(manager, threads=16) as stager:
        target = manager.allocate(data.nbytes, kind="mapped")
        stager.upload(data, target)  # mappable: direct, unmeasured
        np.testing.assert_array_equal(stager.download(target, data.shape), data)
        assert stager.paths == {} and stager.counts["upload"]["direct"] == 1
        stager.paths = {"upload": "staged", "download": "staged"}
        stager.upload(data[:1], target)  # 4 bytes: written by the recording, no ring
        assert stager.counts["upload"]["inline"] == 1 and "upload" not in stager._rings
        np.testing.assert_array_equal(target.read(np.float32, 1), data[:1])
        stager.upload(data.view(np.uint8)[:5], target)  # not whole words: staged
        assert len(stager._rings["upload"]) == 1  # one chunk, not 32 of them
        stager.upload(data, target)
        np.testing.assert_array_equal(stager.download(target, data.shape), data)
        chunk = stager.chunk_for(data.nbytes)
        for ring in stager._rings.values():
            assert len(ring) == data.nbytes // chunk
            assert all(slot.size == chunk for slot in ring)
        assert stager._executor is None
        target.free()


@pytest.mark.usefixtures("unmappable_device_memory")
def test_memory_the_host_cannot_map_goes_through_the_copy_engine(device: Device) -> None:
    """As on a discrete GPU: device memory is staged whatever `paths` says, and not measured."""
    data = np.random.default_rng(5).standard_normal(PROBE_BYTES // 4).astype(np.float32)
    direct = {"upload": "direct", "download": "direct"}
    with (
        MemoryManager(device) as manager,
        Stager(manager, chunk_bytes=CHUNK) as measuring,
        Stager(manager, chunk_bytes=CHUNK, paths=direct) as told,
    ):
        target = manager.allocate(data.nbytes)
        with pytest.raises(ValueError, match="which the host cannot map"):
            target.view(np.uint8, 1)
        for stager in (measuring, told):
            stager.upload(data, target)
            np.testing.assert_array_equal(stager.download(target, data.shape), data)
            assert stager.counts["upload"]["staged"] == stager.counts["download"]["staged"] == 1
        assert measuring.paths == {} and measuring.measurements == {}
        target.free()


def test_sizes_are_checked(device: Device) -> None:
    with MemoryManager(device) as manager, Stager(manager) as stager:
        small = manager.allocate(16)
        with pytest.raises(ValueError, match="cannot upload 20 bytes into a 16-byte allocation"):
            stager.upload(np.zeros(5, dtype=np.float32), small)
        with pytest.raises(ValueError, match="cannot download 20 bytes"):
            stager.download(small, 5)
        small.free()


def test_chunks_keep_a_floor_but_four_per_transfer(device: Device) -> None:
    mib = 1 << 20
    with MemoryManager(device) as manager, Stager(manager, threads=16) as stager:
        assert stager.chunk_for(64 * mib) == 8 * mib  # 8 chunks, not 16 of 4 MiB
        assert stager.chunk_for(1 << 30) == 16 * mib  # capped by chunk_bytes
        assert stager.chunk_for(2 * mib) == 512 * 1024  # four chunks
        assert stager.chunk_for(1000) == 64 * 1024


def test_a_grown_ring_still_moves_smaller_transfers(device: Device) -> None:
    rng = np.random.default_rng(4)
    large = rng.integers(0, 255, 3 << 20, dtype=np.uint8)
    small = rng.integers(0, 255, 300_000, dtype=np.uint8)
    staged = {"upload": "staged", "download": "staged"}
    with MemoryManager(device) as manager, Stager(manager, threads=2, paths=staged) as stager:
        target = manager.allocate(large.nbytes)
        for data in (large, small):
            stager.upload(data, target)
            np.testing.assert_array_equal(stager.download(target, data.shape, np.uint8), data)
        target.free()


def _file_of(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "region.bin"
    path.write_bytes(data)
    return path


@pytest.mark.usefixtures("unmappable_device_memory")
@pytest.mark.parametrize("readback_memory", ["pinned", "imported"])
@pytest.mark.parametrize("threads", [1, 3])
def test_a_file_region_streams_through_the_ring(
    device: Device, tmp_path: Path, threads: int, readback_memory: str
) -> None:
    """Chunks of a region (not a multiple of the chunk, several rings' worth) read into the
    ring and copied by the device; inspect sees every chunk once, at its offset. The ring is
    the readback ring's pinned memory, or host memory imported chunk by chunk."""
    rng = np.random.default_rng(6)
    header, body = rng.bytes(128), rng.bytes(7 * CHUNK + 1234)
    path = _file_of(tmp_path, header + body + rng.bytes(99))
    seen: list[tuple[int, bytes]] = []
    with (
        MemoryManager(device) as manager,
        Stager(
            manager,
            chunk_bytes=CHUNK,
            slots=2,
            threads=threads,
            threaded_from=0,
            readback_memory=readback_memory,
        ) as stager,
        path.open("rb") as stream,
    ):
        target = manager.allocate(len(body) + 16)
        for _ in range(2):  # the second upload reuses the ring as it is
            seen.clear()
            stager.upload_file(
                stream.fileno(),
                128,
                len(body),
                target,
                lambda c, at: seen.append((at, c.tobytes())),
            )
            back = stager.download(target, len(body), np.uint8)
            assert back.tobytes() == body
        assert stager.counts["upload"]["file"] == 2
        kind = "readback" if readback_memory == "pinned" else "imported"
        assert len(stager._rings[kind]) == 2  # of `slots`; the ring downloads use too
        stats = stager.stats()
        assert stats["staging_bytes"] == 2 * CHUNK
        spent = stats["staging_import_ms"] if kind == "imported" else stats["staging_alloc_ms"]
        assert spent > 0.0
        target.free()
    assert sorted(seen) == [(at, body[at : at + CHUNK]) for at in range(0, len(body), CHUNK)]


@pytest.mark.usefixtures("unmappable_device_memory")
def test_an_imported_ring_is_made_again_whole_to_grow(device: Device, tmp_path: Path) -> None:
    body = np.random.default_rng(10).bytes(5 * CHUNK)
    path = _file_of(tmp_path, body)
    with (
        MemoryManager(device) as manager,
        Stager(
            manager,
            chunk_bytes=CHUNK,
            slots=3,
            threads=3,
            threaded_from=0,
            readback_memory="imported",
        ) as stager,
        path.open("rb") as stream,
    ):
        target = manager.allocate(len(body))
        stager.upload_file(stream.fileno(), 0, CHUNK, target)
        first = stager._rings["imported"]
        assert len(first) == 1
        stager.upload_file(stream.fileno(), 0, len(body), target)
        grown = stager._rings["imported"]
        assert len(grown) == 3 and grown[0].block is not first[0].block
        assert first[0].block.users == 0  # the first block is gone
        assert {chunk.block for chunk in grown} == {grown[0].block}
        assert stager.download(target, len(body), np.uint8).tobytes() == body
        target.free()


@pytest.mark.usefixtures("unmappable_device_memory")
def test_a_refused_import_falls_back_to_the_pinned_ring(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host memory the driver will not import after all: the transfer goes through the pinned
    ring instead, says why in import_refused, and later ones do not try again."""
    tries: list[int] = []

    def refuse(self: HostImporter, array: np.ndarray) -> None:
        tries.append(array.size)
        raise ValueError("no memory type can import these bytes")

    monkeypatch.setattr(HostImporter, "import_array", refuse)
    data = np.random.default_rng(11).standard_normal(3 * CHUNK // 4).astype(np.float32)
    with (
        MemoryManager(device) as manager,
        Stager(manager, chunk_bytes=CHUNK, slots=2, threads=2, threaded_from=0) as stager,
    ):
        target = manager.allocate(data.nbytes)
        stager.upload(data, target)
        for _ in range(2):
            np.testing.assert_array_equal(stager.download(target, data.shape), data)
        assert stager.import_refused == "ValueError: no memory type can import these bytes"
        assert len(tries) == 1 and "imported" not in stager._rings
        assert len(stager._rings["readback"]) == 2
        target.free()


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("readback_memory", "mapped", "readback_memory must be one of imported, pinned"),
        ("upload_memory", "fast", "upload_memory must be one of"),
    ],
)
def test_a_ring_memory_must_be_named(
    device: Device, argument: str, value: str, message: str
) -> None:
    with MemoryManager(device) as manager, pytest.raises(ValueError, match=message):
        Stager(manager, **{argument: value})


def test_a_file_region_is_read_straight_into_mapped_cached_memory(
    device: Device, tmp_path: Path
) -> None:
    body = np.random.default_rng(7).bytes(3 * CHUNK + 5)
    path = _file_of(tmp_path, b"xy" + body)
    with (
        MemoryManager(device) as manager,
        Stager(manager, chunk_bytes=CHUNK, threads=2, threaded_from=0) as stager,
        path.open("rb") as stream,
    ):
        target = manager.allocate(len(body), kind="readback")  # HOST_CACHED, mapped
        stager.upload_file(stream.fileno(), 2, len(body), target)
        assert target.read(np.uint8, len(body)).tobytes() == body
        assert stager.counts["upload"]["file_direct"] == 1
        assert "readback" not in stager._rings
        target.free()


@pytest.mark.usefixtures("unmappable_device_memory")
def test_small_uploads_are_carried_by_the_recording(device: Device) -> None:
    """Up to 64 KiB in whole words, an upload into memory the host cannot map is written by
    vkCmdUpdateBuffer: exact, counted as inline, no staging memory made; one word more is
    staged as before."""
    rng = np.random.default_rng(12)
    with MemoryManager(device) as manager, Stager(manager, threads=2) as stager:
        target = manager.allocate(UPDATE_LIMIT + 64)
        for count in (1, 3, UPDATE_LIMIT // 4):
            data = rng.standard_normal(count).astype(np.float32)
            stager.upload(data, target)
            np.testing.assert_array_equal(stager.download(target, count), data)
        assert stager.counts["upload"]["inline"] == 3 and "upload" not in stager._rings
        bigger = rng.standard_normal(UPDATE_LIMIT // 4 + 1).astype(np.float32)
        stager.upload(bigger, target)
        np.testing.assert_array_equal(stager.download(target, bigger.size), bigger)
        assert stager.counts["upload"]["staged"] == 1
        target.free()


@pytest.mark.usefixtures("unmappable_device_memory")
def test_a_slow_chunk_holds_up_only_its_own_slot(device: Device, tmp_path: Path) -> None:
    """Chunks are copied in the order their reads end: while the first chunk's read is slow,
    the other slots go on through the rest of the region, and everything lands."""
    body = np.random.default_rng(9).bytes(8 * CHUNK)
    path = _file_of(tmp_path, body)
    ended: list[int] = []

    def inspect(chunk: Any, start: int) -> None:
        if start == 0:
            time.sleep(0.5)
        ended.append(start // CHUNK)

    with (
        MemoryManager(device) as manager,
        Stager(manager, chunk_bytes=CHUNK, slots=3, threads=3, threaded_from=0) as stager,
        path.open("rb") as stream,
    ):
        target = manager.allocate(len(body))
        stager.upload_file(stream.fileno(), 0, len(body), target, inspect)
        assert stager.download(target, len(body), np.uint8).tobytes() == body
        target.free()
    assert sorted(ended) == list(range(8))
    assert ended[-1] == 0  # the other two slots took all seven other chunks meanwhile


@pytest.mark.usefixtures("unmappable_device_memory")
@pytest.mark.parametrize("threads", [1, 3])
def test_regions_of_several_files_share_one_pipeline(
    device: Device, tmp_path: Path, threads: int
) -> None:
    """Three regions in one call: two through the ring (their chunks in one pipeline, on a
    ring shorter than either), one read straight into mapped cached memory; each lands at
    the start of its allocation and its inspect sees only its own chunks."""
    rng = np.random.default_rng(8)
    bodies = [rng.bytes(3 * CHUNK + 17), rng.bytes(2 * CHUNK), rng.bytes(CHUNK + 5)]
    paths = []
    for number, body in enumerate(bodies):
        paths.append(tmp_path / f"f{number}.bin")
        paths[-1].write_bytes(bytes(number + 1) + body)
    seen: list[list[int]] = [[], [], []]
    with (
        MemoryManager(device) as manager,
        Stager(manager, chunk_bytes=CHUNK, slots=2, threads=threads, threaded_from=0) as stager,
        paths[0].open("rb") as f0,
        paths[1].open("rb") as f1,
        paths[2].open("rb") as f2,
    ):
        targets = [
            manager.allocate(len(bodies[0])),
            manager.allocate(len(bodies[1]) + 4),
            manager.allocate(len(bodies[2]), kind="readback"),  # HOST_CACHED, mapped
        ]
        files = (f0, f1, f2)
        regions = [
            FileRegion(
                f.fileno(),
                number + 1,
                len(body),
                target,
                lambda c, at, n=number: seen[n].append(at),
            )
            for number, (f, body, target) in enumerate(zip(files, bodies, targets, strict=True))
        ]
        stager.upload_files(regions)
        for body, target in zip(bodies[:2], targets[:2], strict=True):
            assert stager.download(target, len(body), np.uint8).tobytes() == body
        assert targets[2].read(np.uint8, len(bodies[2])).tobytes() == bodies[2]
        assert stager.counts["upload"]["file"] == 2
        assert stager.counts["upload"]["file_direct"] == 1
        assert len(stager._rings["imported"]) == 2  # the default readback memory
        for target in targets:
            target.free()
    assert [sorted(at) for at in seen] == [[at for at in range(0, len(b), CHUNK)] for b in bodies]


@pytest.mark.usefixtures("unmappable_device_memory")
def test_a_region_that_cannot_be_read_is_named(device: Device, tmp_path: Path) -> None:
    """The second of two files ends early: RegionReadError says which region, with the
    EOFError, and nothing is left in flight (the ring works after it)."""
    full, short = tmp_path / "full.bin", tmp_path / "short.bin"
    full.write_bytes(bytes(2 * CHUNK))
    short.write_bytes(bytes(CHUNK))
    with (
        MemoryManager(device) as manager,
        Stager(manager, chunk_bytes=CHUNK, slots=2, threads=3, threaded_from=0) as stager,
        full.open("rb") as f0,
        short.open("rb") as f1,
    ):
        a, b = manager.allocate(2 * CHUNK), manager.allocate(2 * CHUNK)
        with pytest.raises(RegionReadError, match=f"ends at byte {CHUNK}") as raised:
            stager.upload_files(
                [FileRegion(f0.fileno(), 0, 2 * CHUNK, a), FileRegion(f1.fileno(), 0, 2 * CHUNK, b)]
            )
        assert raised.value.region == 1
        assert isinstance(raised.value.error, EOFError)
        stager.upload_files([FileRegion(f0.fileno(), 0, 2 * CHUNK, b)])
        assert stager.download(b, 2 * CHUNK, np.uint8).tobytes() == bytes(2 * CHUNK)
        a.free()
        b.free()


@pytest.mark.usefixtures("unmappable_device_memory")
@pytest.mark.parametrize("threads", [1, 3])
def test_a_short_file_or_a_refusing_inspect_stops_the_upload(
    device: Device, tmp_path: Path, threads: int
) -> None:
    path = _file_of(tmp_path, bytes(5 * CHUNK))

    def refuse(chunk: np.ndarray[Any, Any], at: int) -> None:
        if at == 2 * CHUNK:
            raise ValueError(f"bad chunk at {at}")

    with (
        MemoryManager(device) as manager,
        Stager(manager, chunk_bytes=CHUNK, slots=2, threads=threads, threaded_from=0) as stager,
        path.open("rb") as stream,
    ):
        target = manager.allocate(6 * CHUNK)
        with pytest.raises(EOFError, match=f"ends at byte {5 * CHUNK}, 100 bytes short"):
            stager.upload_file(stream.fileno(), 100, 5 * CHUNK, target)
        with pytest.raises(ValueError, match=f"bad chunk at {2 * CHUNK}"):
            stager.upload_file(stream.fileno(), 0, 5 * CHUNK, target, refuse)
        with pytest.raises(ValueError, match="cannot upload"):
            stager.upload_file(stream.fileno(), 0, 7 * CHUNK, target)
        stager.upload_file(stream.fileno(), 0, 5 * CHUNK, target)  # the ring still works
        assert stager.download(target, 5 * CHUNK, np.uint8).tobytes() == bytes(5 * CHUNK)
        target.free()
