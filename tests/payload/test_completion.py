"""`gpulab completion bash`: a script bash accepts, and what real bash completes with it
(COMP_WORDS set as readline would, the completion function registered by `complete`); and
`gpulab completion` of a shell it does not know. zsh and fish: test_completion_zsh.py and
test_completion_fish.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.payload.test_cli import gpulab


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    done = gpulab("completion", "bash")
    assert done.returncode == 0, done.stderr
    path = tmp_path_factory.mktemp("completion") / "gpulab.bash"
    path.write_text(done.stdout)
    return path


def complete(script: Path, *words: str, cwd: Path | None = None) -> list[str]:
    """What bash offers for the last of words (the line `gpulab WORDS...`)."""
    quoted = " ".join(f"'{word}'" for word in ("gpulab", *words))
    program = (
        f"source '{script}' && complete -p gpulab >&2 && "
        f"COMP_WORDS=({quoted}) && COMP_CWORD={len(words)} && "
        '_gpulab 2>/dev/null; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
    )
    assert done.stderr == "complete -F _gpulab gpulab\n"
    return [line for line in done.stdout.splitlines() if line]


def test_bash_accepts_the_script(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_subcommand_completes_from_its_first_letters(script: Path) -> None:
    assert complete(script, "r") == ["run"]
    assert complete(script, "s") == ["selftest", "schema", "submit"]


def test_every_subcommand_is_offered(script: Path) -> None:
    offered = complete(script, "")
    for command in ("devices", "run", "validate", "submit", "bench", "completion"):
        assert command in offered
    assert "--version" in offered


def test_options_and_their_choices(script: Path) -> None:
    assert complete(script, "submit", "GRAPH.json", "--ho") == ["--host"]
    assert complete(script, "run", "--backend", "") == ["auto", "cpu", "native", "vulkan"]
    assert complete(script, "completion", "") == ["bash", "zsh", "fish"]


def test_an_option_of_several_values_keeps_offering_them(script: Path) -> None:
    assert complete(script, "bench", "--ops", "copy", "sa") == ["saxpy"]
    assert complete(script, "bench", "--ops", "copy", "--pl") == ["--plot"]


def test_a_graph_completes_as_a_file_name(script: Path, tmp_path: Path) -> None:
    (tmp_path / "saxpy.json").write_text("{}")
    (tmp_path / "sum.json").write_text("{}")
    assert complete(script, "run", "--backend", "cpu", "sa", cwd=tmp_path) == ["saxpy.json"]
    assert sorted(complete(script, "validate", "s", cwd=tmp_path)) == ["saxpy.json", "sum.json"]


def test_an_unknown_shell_is_one_line_and_exit_2() -> None:
    done = gpulab("completion", "tcsh")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "gpulab completion: unknown shell 'tcsh': choose bash, zsh, fish\n"


@pytest.mark.parametrize(
    ("shell", "first_line"),
    [
        ("bash", "# bash completion for gpulab, written by `gpulab completion bash`."),
        ("zsh", "#compdef gpulab"),
        ("fish", "# fish completion for gpulab, written by `gpulab completion fish`."),
    ],
)
def test_each_shell_gets_its_own_script(shell: str, first_line: str) -> None:
    done = gpulab("completion", shell)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[0] == first_line


BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")


@pytest.mark.skipif(not BASH_COMPLETION.exists(), reason="the bash-completion package is missing")
def test_host_completes_from_the_ssh_config_with_bash_completion(
    script: Path, tmp_path: Path
) -> None:
    """bash-completion's _known_hosts_real reads ~/.ssh/config's Host lines (HOME here)."""
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host lab-controller\n    HostName 10.0.0.5\n")
    program = (
        f"source {BASH_COMPLETION} && source '{script}' && "
        "COMP_WORDS=(gpulab submit g.json --host lab-) && COMP_CWORD=4 && "
        '_gpulab 2>/dev/null; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert done.stdout.split() == ["lab-controller"]
