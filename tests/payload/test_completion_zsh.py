"""`gpulab completion zsh`: a script zsh accepts, and what real zsh completes with it.

zsh completes only inside its line editor, so each case starts an interactive `zsh -f` on a
pseudo-terminal (zsh/zpty), loads compinit and the script there, types the line and a Tab, and
records every word the completion functions add after matching (a `compadd` wrapper), as a user
would see them offered.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.payload.test_cli import GPULAB, PYTHONPATH, gpulab

pytestmark = pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh (scripts/setup.sh)")

DONE = "--done--"
INIT = r"""
PROMPT='' RPROMPT=''
fpath=($GPULAB_FPATH $fpath)
autoload -Uz compinit && compinit -u -D
eval $GPULAB_LOAD
# Each word a completion function adds (compadd's matching done), one a line in $GPULAB_OUT;
# the calls that only ask (-O, -A, -D) pass through.
compadd() {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
    local -a hits
    builtin compadd -O hits "$@"
    (( $#hits )) && print -rl -- $hits >> $GPULAB_OUT
    builtin compadd "$@"
}
_gpulab_test_done() { print -r -- --done-- >> $GPULAB_OUT }
comppostfuncs=(_gpulab_test_done)
bindkey '^I' complete-word
"""
DRIVE = r"""
zmodload zsh/zpty
zpty gpulab zsh -f -i
zpty -w gpulab "source ${(q)GPULAB_INIT}"
zpty -w gpulab "$1"$'\t'
repeat 400; do
    [[ -f $GPULAB_OUT && "$(<$GPULAB_OUT)" == *--done--* ]] && break
    sleep 0.05
done
zpty -d gpulab
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    done = gpulab("completion", "zsh")
    assert done.returncode == 0, done.stderr
    path = tmp_path_factory.mktemp("completion") / "_gpulab"
    path.write_text(done.stdout)
    return path


def offered(
    line: str,
    tmp_path: Path,
    *,
    load: str = "",
    fpath: Path | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
) -> list[str]:
    """What zsh offers at the end of line, sorted; load is the zsh that loads the script."""
    harness = tmp_path / "harness"
    harness.mkdir(exist_ok=True)
    (harness / "init.zsh").write_text(INIT)
    (harness / "drive.zsh").write_text(DRIVE)
    out = harness / "offered"
    out.unlink(missing_ok=True)
    env = {
        "HOME": str(home or harness),
        "PATH": "/usr/bin:/bin",
        "TERM": "dumb",
        "GPULAB_INIT": str(harness / "init.zsh"),
        "GPULAB_OUT": str(out),
        "GPULAB_LOAD": load,
        "GPULAB_FPATH": str(fpath or ""),
        "PYTHONPATH": PYTHONPATH,
    }
    subprocess.run(
        ["zsh", "-f", str(harness / "drive.zsh"), line],
        env=env,
        cwd=cwd or tmp_path,
        capture_output=True,
        timeout=60,
        check=True,
    )
    words = out.read_text().splitlines() if out.exists() else []
    assert words[-1:] == [DONE], f"zsh did not finish completing {line!r}: {words}"
    return sorted(words[:-1])


def complete(script: Path, tmp_path: Path, line: str, **where: Path) -> list[str]:
    return offered(line, tmp_path, load=f"source {shlex.quote(str(script))}", **where)


def test_zsh_accepts_the_script(script: Path) -> None:
    done = subprocess.run(["zsh", "-n", str(script)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_subcommand_completes_from_its_first_letters(script: Path, tmp_path: Path) -> None:
    assert complete(script, tmp_path, "gpulab r") == ["run"]
    assert complete(script, tmp_path, "gpulab s") == ["schema", "selftest", "submit"]


def test_every_subcommand_and_option_is_offered(script: Path, tmp_path: Path) -> None:
    commands = complete(script, tmp_path, "gpulab ")
    for command in ("devices", "run", "validate", "submit", "bench", "completion"):
        assert command in commands
    assert complete(script, tmp_path, "gpulab -") == ["--help", "--version", "-h"]


def test_options_and_their_choices(script: Path, tmp_path: Path) -> None:
    assert complete(script, tmp_path, "gpulab submit g.json --ho") == ["--host"]
    assert complete(script, tmp_path, "gpulab run --backend ") == [
        "auto",
        "cpu",
        "native",
        "vulkan",
    ]
    assert complete(script, tmp_path, "gpulab completion ") == ["bash", "fish", "zsh"]


def test_an_option_of_several_values_keeps_offering_them(script: Path, tmp_path: Path) -> None:
    assert complete(script, tmp_path, "gpulab bench --ops copy sa") == ["saxpy"]
    assert complete(script, tmp_path, "gpulab bench --ops copy --pl") == ["--plot"]


def test_a_graph_completes_as_a_file_name(script: Path, tmp_path: Path) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    (graphs / "saxpy.json").write_text("{}")
    (graphs / "sum.json").write_text("{}")
    line = "gpulab run --backend cpu sa"
    assert complete(script, tmp_path, line, cwd=graphs) == ["saxpy.json"]
    assert complete(script, tmp_path, "gpulab validate s", cwd=graphs) == ["saxpy.json", "sum.json"]


def test_host_completes_from_the_ssh_config(script: Path, tmp_path: Path) -> None:
    """The Host names of ~/.ssh/config (HOME here), patterns left out, after a USER@ too."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        "Host lab-controller lab-*\n    HostName 10.0.0.5\nHost lab-login\n"
    )
    line = "gpulab submit g.json --host lab-"
    assert complete(script, tmp_path, line, home=home) == ["lab-controller", "lab-login"]
    line = "gpulab submit g.json --host me@lab-c"
    assert complete(script, tmp_path, line, home=home) == ["lab-controller"]


def test_the_script_autoloads_from_fpath(script: Path, tmp_path: Path) -> None:
    """Saved as _gpulab in a directory of $fpath, compinit finds it by its #compdef line."""
    assert offered("gpulab run --backend c", tmp_path, fpath=script.parent) == ["cpu"]


def test_the_documented_line_loads_it(tmp_path: Path) -> None:
    """`source <(gpulab completion zsh)` in ~/.zshrc after compinit."""
    load = f"source <({shlex.join(GPULAB)} completion zsh)"
    assert offered("gpulab completion z", tmp_path, load=load) == ["zsh"]
