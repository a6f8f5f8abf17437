"""`gpulab completion fish`: a script fish accepts, and what real fish completes with it
(`complete -C LINE` prints what a Tab at the end of LINE offers)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.payload.test_cli import GPULAB, PYTHONPATH, gpulab

pytestmark = pytest.mark.skipif(shutil.which("fish") is None, reason="no fish (scripts/setup.sh)")


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    done = gpulab("completion", "fish")
    assert done.returncode == 0, done.stderr
    path = tmp_path_factory.mktemp("completion") / "gpulab.fish"
    path.write_text(done.stdout)
    return path


def offered(load: str, line: str, tmp_path: Path, home: Path | None = None) -> list[str]:
    """What fish offers at the end of line (the words, not their descriptions), sorted."""
    done = subprocess.run(
        ["fish", "--no-config", "-c", f"{load}; complete -C {shlex.quote(line)}"],
        env={"HOME": str(home or tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": PYTHONPATH},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return sorted(line.split("\t")[0] for line in done.stdout.splitlines())


def complete(script: Path, line: str, tmp_path: Path, home: Path | None = None) -> list[str]:
    return offered(f"source {shlex.quote(str(script))}", line, tmp_path, home)


def test_fish_accepts_the_script(script: Path) -> None:
    done = subprocess.run(["fish", "-n", str(script)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_subcommand_completes_from_its_first_letters(script: Path, tmp_path: Path) -> None:
    assert complete(script, "gpulab r", tmp_path) == ["run"]
    assert complete(script, "gpulab s", tmp_path) == ["schema", "selftest", "submit"]


def test_every_subcommand_and_option_is_offered(script: Path, tmp_path: Path) -> None:
    commands = complete(script, "gpulab ", tmp_path)
    for command in ("devices", "run", "validate", "submit", "bench", "completion"):
        assert command in commands
    assert complete(script, "gpulab -", tmp_path) == ["--help", "--version", "-h"]


def test_options_and_their_choices(script: Path, tmp_path: Path) -> None:
    assert complete(script, "gpulab submit g.json --ho", tmp_path) == ["--host"]
    assert complete(script, "gpulab run --backend ", tmp_path) == [
        "auto",
        "cpu",
        "native",
        "vulkan",
    ]
    assert complete(script, "gpulab completion ", tmp_path) == ["bash", "fish", "zsh"]
    assert complete(script, "gpulab run --device ", tmp_path) == []


def test_an_option_of_several_values_keeps_offering_them(script: Path, tmp_path: Path) -> None:
    assert complete(script, "gpulab bench --ops copy sa", tmp_path) == ["saxpy"]
    assert complete(script, "gpulab bench --ops copy --pl", tmp_path) == ["--plot"]


def test_a_graph_completes_as_a_file_name(script: Path, tmp_path: Path) -> None:
    (tmp_path / "saxpy.json").write_text("{}")
    (tmp_path / "sum.json").write_text("{}")
    assert complete(script, "gpulab run --backend cpu sa", tmp_path) == ["saxpy.json"]
    assert complete(script, "gpulab validate s", tmp_path) == ["saxpy.json", "sum.json"]
    assert complete(script, "gpulab run g.json -o su", tmp_path) == ["sum.json"]
    # Only where a file is wanted.
    assert complete(script, "gpulab devices s", tmp_path) == []


def test_host_completes_from_the_ssh_config(script: Path, tmp_path: Path) -> None:
    """fish's own host list reads ~/.ssh/config (HOME here), after a USER@ too."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host lab-controller\n    HostName 10.0.0.5\n")
    line = "gpulab submit g.json --host lab-"
    assert complete(script, line, tmp_path, home) == ["lab-controller"]
    line = "gpulab submit g.json --host me@lab-"
    assert complete(script, line, tmp_path, home) == ["me@lab-controller"]


def test_the_documented_line_loads_it(tmp_path: Path) -> None:
    """`gpulab completion fish | source`, as ~/.config/fish/completions/gpulab.fish would."""
    load = f"{shlex.join(GPULAB)} completion fish | source"
    assert offered(load, "gpulab su", tmp_path) == ["submit"]
