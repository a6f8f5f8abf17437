"""gpulab.cluster.converge_record: a role's record of its last converge, against real files and
this machine's dpkg (the services part needs systemd: molecule's scenarios exercise it)."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulab.cluster.plugins.filter import tree_digest as digests
from ansible_collections.gpulab.cluster.plugins.modules import converge_record


def run(capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        converge_record.main()
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


@pytest.fixture
def managed(tmp_path: Path) -> dict[str, Any]:
    config = tmp_path / "etc/app.conf"
    config.parent.mkdir()
    config.write_text("Key=1\n")
    return {
        "path": str(tmp_path / "state/app.json"),
        "inputs": {"settings": {"app_key": 1}, "conf": "Key=1\n"},
        "files": [str(config), str(tmp_path / "etc/absent.conf")],
        "packages": ["bash"],
    }


def test_no_record_does_not_hold(
    capsys: pytest.CaptureFixture[str], managed: dict[str, Any]
) -> None:
    result = run(capsys, **managed)
    assert (result["holds"], result["reason"], result["changed"]) == (
        False,
        "no record of a converge",
        False,
    )


def test_a_record_holds_until_a_file_changes(
    capsys: pytest.CaptureFixture[str], managed: dict[str, Any]
) -> None:
    assert run(capsys, state="record", **managed)["changed"] is True
    assert run(capsys, state="record", **managed)["changed"] is False  # the same record again
    assert run(capsys, **managed)["holds"] is True

    Path(managed["files"][0]).write_text("Key=2\n")
    result = run(capsys, **managed)
    assert (result["holds"], result["reason"]) == (
        False,
        f"{managed['files'][0]} differs from the last converge",
    )
    assert not Path(managed["path"]).exists()  # a converge that fails from here leaves no record


def test_a_file_that_appears_or_new_inputs_break_the_record(
    capsys: pytest.CaptureFixture[str], managed: dict[str, Any]
) -> None:
    run(capsys, state="record", **managed)
    Path(managed["files"][1]).write_text("new\n")
    assert (
        run(capsys, **managed)["reason"] == f"{managed['files'][1]} differs from the last converge"
    )

    run(capsys, state="record", **managed)
    changed = dict(managed, inputs={"settings": {"app_key": 2}, "conf": "Key=1\n"})
    assert run(capsys, **changed)["reason"] == "what the role converges from changed"


def test_packages_are_recorded_with_their_version(
    capsys: pytest.CaptureFixture[str], managed: dict[str, Any]
) -> None:
    run(capsys, state="record", **managed)
    record = json.loads(Path(managed["path"]).read_text())
    assert record["packages"]["bash"]  # this machine's bash, from dpkg
    record["packages"]["bash"] = "0.1"
    Path(managed["path"]).write_text(json.dumps(record))
    assert run(capsys, **managed)["reason"] == "package bash differs from the last converge"

    missing = dict(managed, packages=["bash", "gpulab-no-such-package"])
    run(capsys, state="record", **missing)
    assert (
        json.loads(Path(managed["path"]).read_text())["packages"]["gpulab-no-such-package"] is None
    )
    assert run(capsys, **missing)["holds"] is True


def test_check_mode_reads_only(capsys: pytest.CaptureFixture[str], managed: dict[str, Any]) -> None:
    assert run(capsys, state="record", _ansible_check_mode=True, **managed)["changed"] is True
    assert not Path(managed["path"]).exists()
    run(capsys, state="record", **managed)
    Path(managed["files"][0]).write_text("Key=2\n")
    assert run(capsys, _ansible_check_mode=True, **managed)["holds"] is False
    assert Path(managed["path"]).exists()


def test_the_record_keeps_only_the_digest_of_the_inputs(
    capsys: pytest.CaptureFixture[str], managed: dict[str, Any]
) -> None:
    run(capsys, state="record", **dict(managed, inputs={"password": "s3cret-for-the-test"}))
    assert "s3cret-for-the-test" not in Path(managed["path"]).read_text()


def test_tree_digest_follows_every_file(tmp_path: Path) -> None:
    role = tmp_path / "role"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks/main.yml").write_text("---\n")
    first = digests.tree_digest(str(role))
    (role / "tasks/main.yml").write_text("--- # changed\n")
    digests._directory_digest.cache_clear()  # read once per directory and process otherwise
    assert digests.tree_digest(str(role)) != first
    assert digests.tree_digest([str(role), str(tmp_path / "absent")]) != digests.tree_digest(
        str(role)
    )


def test_accounts_and_groups_are_recorded_by_entry(
    capsys: pytest.CaptureFixture[str], managed: dict[str, Any]
) -> None:
    accounts = dict(
        managed, users=["root", "gpulab-no-such-user"], groups=["root", "gpulab-no-such-group"]
    )
    run(capsys, state="record", **accounts)
    record = json.loads(Path(managed["path"]).read_text())
    assert record["users"]["root"][:2] == [0, 0] and record["users"]["root"][3] == "/root"
    assert record["users"]["gpulab-no-such-user"] is None
    assert record["groups"] == {"root": 0, "gpulab-no-such-group": None}
    assert run(capsys, **accounts)["holds"] is True
    record["groups"]["root"] = 4242
    Path(managed["path"]).write_text(json.dumps(record))
    assert run(capsys, **accounts)["reason"] == "group root differs from the last converge"


def test_records_are_roots_alone_and_keyed(
    capsys: pytest.CaptureFixture[str], managed: dict[str, Any]
) -> None:
    # A probe of a running lab: the records were 0644 in a 0755 folder and held the plain
    # SHA-256 of slurmdbd.conf, so a job user filling the public template with guesses found
    # the password. Now nothing in them checks a guess without the host's key.
    secret_file = Path(managed["files"][0])
    secret_file.write_text("StoragePass=guess-me\n")
    inputs = {"dbd": "StoragePass=guess-me\n"}
    run(capsys, state="record", **dict(managed, inputs=inputs))
    state = Path(managed["path"]).parent
    text = Path(managed["path"]).read_text()
    assert hashlib.sha256(secret_file.read_bytes()).hexdigest() not in text
    plain_inputs = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    assert hashlib.sha256(plain_inputs.encode()).hexdigest() not in text
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [state, *state.iterdir()]}
    assert modes == {"state": 0o700, "app.json": 0o600, ".key": 0o600}
    assert run(capsys, **dict(managed, inputs=inputs))["holds"] is True


def test_an_old_open_record_is_closed_and_rewritten(
    capsys: pytest.CaptureFixture[str], managed: dict[str, Any]
) -> None:
    # Records of earlier releases: plain digests, 0644 in a 0755 folder, no key.
    state = Path(managed["path"]).parent
    state.mkdir(mode=0o755)
    Path(managed["path"]).write_text("{}\n")
    Path(managed["path"]).chmod(0o644)
    assert run(capsys, **managed)["holds"] is False  # no key: no record to trust
    assert run(capsys, state="record", **managed)["changed"] is True
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(managed["path"]).stat().st_mode) == 0o600
    assert run(capsys, **managed)["holds"] is True
