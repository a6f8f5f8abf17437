"""The text exposition format and the atomic textfile write."""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

import pytest
from gpulab.metrics import Family, render, write_textfile

from tests.metrics.promtext import labels, parse


def test_families_parse_back_with_their_types_help_and_labels() -> None:
    text = render(
        [
            Family("gpulab_slurm_up", "1 when sinfo answered").add(1),
            Family("gpulab_gpu_health_ok", "1 when healthy").add(1, device="0").add(0, device="1"),
            Family("gpulab_things_total", "A counter", "counter").add(7),
        ]
    )
    samples, types = parse(text)
    assert samples["gpulab_slurm_up"] == {labels(): 1.0}
    assert samples["gpulab_gpu_health_ok"] == {labels(device="0"): 1.0, labels(device="1"): 0.0}
    # The parser names a counter family without _total and its sample with it.
    assert types == {
        "gpulab_slurm_up": "gauge",
        "gpulab_gpu_health_ok": "gauge",
        "gpulab_things": "counter",
    }
    assert samples["gpulab_things_total"] == {labels(): 7.0}
    assert "# HELP gpulab_slurm_up 1 when sinfo answered\n# TYPE gpulab_slurm_up gauge\n" in text
    assert text.endswith("\n")


def test_label_values_and_help_are_escaped() -> None:
    name = 'llvmpipe "x"\\y\nz'
    text = render([Family("gpulab_gpu_info", "line one\nline two \\ end").add(1, name=name)])
    samples, _ = parse(text)
    assert samples["gpulab_gpu_info"] == {labels(name=name): 1.0}
    assert "# HELP gpulab_gpu_info line one\\nline two \\\\ end\n" in text


def test_values_keep_integers_exact_and_spell_special_floats() -> None:
    text = render(
        [
            Family("gpulab_a_bytes", "big").add(140 * 2**30),
            Family("gpulab_b_seconds", "fraction").add(0.116468),
            Family("gpulab_c", "nan").add(math.nan),
            Family("gpulab_d", "inf").add(math.inf),
        ]
    )
    assert "gpulab_a_bytes 150323855360\n" in text
    assert "gpulab_b_seconds 0.116468\n" in text
    assert "gpulab_c NaN\n" in text
    assert "gpulab_d +Inf\n" in text


def test_a_family_without_samples_is_left_out() -> None:
    assert render([Family("gpulab_gpu_memory_used_bytes", "not reported")]) == ""


def test_bad_names_and_a_repeated_family_are_refused() -> None:
    with pytest.raises(ValueError, match="metric name"):
        Family("gpulab-gpu", "dash")
    with pytest.raises(ValueError, match="label name"):
        Family("gpulab_gpu", "x").add(1, __name="y")
    with pytest.raises(ValueError, match="given twice"):
        render([Family("gpulab_x", "a").add(1), Family("gpulab_x", "b").add(2)])


def test_the_textfile_is_replaced_whole_and_readable(tmp_path: Path) -> None:
    target = tmp_path / "gpulab.prom"
    target.write_text("old\n")
    os.chmod(target, 0o600)
    write_textfile(target, "gpulab_slurm_up 1\n")
    assert target.read_text() == "gpulab_slurm_up 1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["gpulab.prom"]  # no temporary file left


def test_only_prom_files_are_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"only \*\.prom"):
        write_textfile(tmp_path / "gpulab.txt", "")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_textfile(tmp_path / "missing" / "gpulab.prom", "")
    assert list(tmp_path.iterdir()) == []
