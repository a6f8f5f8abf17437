"""`--host ALIAS` resolved by OpenSSH's own `ssh -G` from real config files (ssh -F): what
the SshTarget holds, which flags win, and the proxy commands ssh would run."""

from __future__ import annotations

import getpass
import shutil
from pathlib import Path

import pytest
from gpulab.cli.main import main
from gpulab.submit import resolve_target
from gpulab.submit.ssh_config import jump_argv

needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH's ssh is missing")

GRAPH = str(Path(__file__).resolve().parents[2] / "payload/examples/saxpy_norm.json")


def config(tmp_path: Path, text: str) -> str:
    """An SSH config file with text, and the key and known_hosts files it names."""
    (tmp_path / "id_lab").write_text("not read before connecting\n")
    (tmp_path / "known_hosts").write_text("")
    path = tmp_path / "config"
    path.write_text(text.replace("DIR", str(tmp_path)))
    return str(path)


LAB = """
Host lab
    HostName 127.0.0.1
    User gpulab
    Port 2222
    IdentityFile DIR/id_lab
    UserKnownHostsFile DIR/known_hosts

Host *.cluster
    User operator
    IdentitiesOnly yes
"""


@needs_ssh
def test_an_alias_resolves_to_its_host_user_port_key_and_known_hosts(tmp_path: Path) -> None:
    target = resolve_target("lab", config=config(tmp_path, LAB))
    assert (target.host, target.user, target.port) == ("127.0.0.1", "gpulab", 2222)
    assert target.key_files == (str(tmp_path / "id_lab"),)
    assert target.host_key_files == (str(tmp_path / "known_hosts"),)
    assert (target.identity, target.known_hosts, target.proxy) == (None, None, ())
    assert target.use_agent
    assert target.where == "lab (gpulab@127.0.0.1:2222)"


@needs_ssh
def test_flags_given_win_over_the_config_as_with_ssh(tmp_path: Path) -> None:
    known = str(tmp_path / "other_known_hosts")
    target = resolve_target(
        "admin@lab", port=2200, identity="key", known_hosts=known, config=config(tmp_path, LAB)
    )
    assert (target.host, target.user, target.port) == ("127.0.0.1", "admin", 2200)
    assert (target.identity, target.known_hosts) == ("key", known)
    assert target.known_hosts_files == (known,)


@needs_ssh
def test_a_host_the_config_does_not_name_keeps_ssh_s_defaults(tmp_path: Path) -> None:
    target = resolve_target("controller1", config=config(tmp_path, LAB))
    assert (target.host, target.user, target.port) == ("controller1", getpass.getuser(), 22)
    assert target.where == f"{getpass.getuser()}@controller1"
    assert target.proxy == ()


@needs_ssh
def test_wildcards_and_identities_only(tmp_path: Path) -> None:
    target = resolve_target("head.cluster", config=config(tmp_path, LAB))
    assert (target.host, target.user) == ("head.cluster", "operator")
    assert not target.use_agent


@needs_ssh
def test_proxyjump_becomes_the_command_openssh_runs_for_it(tmp_path: Path) -> None:
    text = LAB.replace("Port 2222", "Port 2222\n    ProxyJump jumper@bastion:2200,gate")
    path = config(tmp_path, text)
    target = resolve_target("lab", config=path)
    # ssh.c: the last hop is ssh'ed to through the earlier ones, -W to the target.
    assert target.proxy == (
        "ssh", "-J", "jumper@bastion:2200", "-F", path, "-W", "[127.0.0.1]:2222", "gate",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("jumps", "argv"),
    [
        ("bastion", ["ssh", "-W", "[h]:22", "bastion"]),
        ("me@bastion:2200", ["ssh", "-l", "me", "-p", "2200", "-W", "[h]:22", "bastion"]),
        ("ssh://me@[::1]:2200", ["ssh", "-l", "me", "-p", "2200", "-W", "[h]:22", "::1"]),
        ("a,b@c", ["ssh", "-l", "b", "-J", "a", "-W", "[h]:22", "c"]),
    ],
)
def test_jump_hosts(jumps: str, argv: list[str]) -> None:
    assert jump_argv(jumps, "h", 22, None) == argv


@needs_ssh
def test_proxycommand_runs_in_the_shell_with_its_tokens_expanded(tmp_path: Path) -> None:
    text = LAB.replace("Port 2222", "Port 2222\n    ProxyCommand relay %h %p %r %n 100%%")
    target = resolve_target("lab", config=config(tmp_path, text))
    assert target.proxy == ("/bin/sh", "-c", "exec relay 127.0.0.1 2222 gpulab lab 100%")


@needs_ssh
def test_a_config_ssh_refuses_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, "Host lab\n    Port twenty-two\n")
    assert main(["submit", GRAPH, "--host", "lab", "--ssh-config", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpulab: --host lab: ssh -G -F {path} -- lab: ")
    assert "line 2" in err
    assert err.count("\n") == 1


@needs_ssh
def test_a_missing_config_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing"
    assert main(["submit", GRAPH, "--host", "lab", "--ssh-config", str(missing)]) == 2
    assert f"{missing}: No such file or directory" in capsys.readouterr().err


def test_ssh_config_needs_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", GRAPH, "--ssh-config", str(tmp_path)]) == 2
    assert "--ssh-config needs --host" in capsys.readouterr().err


def test_without_an_ssh_program_the_host_is_taken_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no ssh on it
    target = resolve_target("lab", port=2200)
    assert (target.host, target.user, target.port, target.proxy) == ("lab", None, 2200, ())
    with pytest.raises(ValueError, match="--ssh-config cfg: reading it needs OpenSSH's ssh"):
        resolve_target("lab", config="cfg")
