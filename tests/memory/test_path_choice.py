"""PathChoice's rules: a given way stands, small transfers are not probed, large ones once."""

from __future__ import annotations

from gpulab.memory.path_choice import PROBE_BYTES, PathChoice, Ways


def test_a_given_way_stands_and_small_transfers_take_the_rule() -> None:
    def never(nbytes: int) -> Ways:
        raise AssertionError(f"probed {nbytes} bytes")

    choice = PathChoice({"upload": "staged"})
    assert choice.choose("upload", 1 << 30, cached=False, ways=never) == "staged"
    small = PROBE_BYTES - 1
    assert choice.choose("download", small, cached=True, ways=never) == "direct"
    assert choice.choose("download", small, cached=False, ways=never) == "staged"
    assert PathChoice().choose("upload", small, cached=False, ways=never) == "direct"
    assert choice.measurements == {}


def test_a_large_transfer_measures_each_way_once_and_keeps_the_choice() -> None:
    runs: list[str] = []
    probed: list[int] = []

    def ways(nbytes: int) -> Ways:
        probed.append(nbytes)
        return {name: (lambda name=name: runs.append(name)) for name in ("direct", "staged")}

    choice = PathChoice()
    first = choice.choose("download", 1 << 30, cached=False, ways=ways)
    assert probed == [PROBE_BYTES] and sorted(runs) == ["direct"] * 3 + ["staged"] * 3
    assert choice.paths == {"download": first} and set(choice.measurements["download"]) == {
        "direct",
        "staged",
    }
    assert choice.choose("download", 1 << 30, cached=False, ways=ways) == first
    assert probed == [PROBE_BYTES]
