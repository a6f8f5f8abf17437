"""The module as Ansible runs it: argument checks, the runner, ansible-doc, the build."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import (
    CommandResult,
    SlurmRunner,
)
from ansible_collections.gpulab.cluster.plugins.modules import slurm_job

from tests.in_repo_collection import REPO


def run_main(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        slurm_job.main()
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_script_and_command_are_mutually_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main({"script": "#!/bin/sh\n", "command": "true"}, capsys)
    assert result["failed"] is True
    assert "mutually exclusive" in result["msg"]


def test_a_job_needs_a_script_or_command(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main({"name": "x"}, capsys)
    assert result["failed"] is True
    assert "script, script_path, command" in result["msg"]


def test_present_needs_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main({"state": "present", "command": "true"}, capsys)
    assert "name" in result["msg"]


def test_check_mode_through_main(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SlurmRunner, "which", lambda self, name: f"/usr/bin/{name}")
    monkeypatch.setenv("HOME", "/home/gpulab")
    result = run_main(
        {"command": "hostname", "nodelist": "worker1", "_ansible_check_mode": True}, capsys
    )
    assert result["changed"] is True
    assert result["cmd"] == [
        "/usr/bin/sbatch",
        "--parsable",
        "--nodelist=worker1",
        "--chdir=/home/gpulab",  # the user's home, not the module's working directory
        "--wrap=hostname",
    ]


def test_an_explicit_chdir_is_kept(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SlurmRunner, "which", lambda self, name: f"/usr/bin/{name}")
    args = {"command": "true", "chdir": "/shared", "_ansible_check_mode": True}
    assert run_main(args, capsys)["cmd"][2] == "--chdir=/shared"


class RecordingModule:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def run_command(self, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        self.calls.append((args, kwargs))
        return 0, "42\n", ""

    def get_bin_path(self, name: str, required: bool = False) -> str | None:
        return None


def test_runner_passes_an_argument_list_and_stdin() -> None:
    module = RecordingModule()
    result = SlurmRunner(module).run(("sbatch", "--parsable"), stdin="#!/bin/sh\n", env={"A": "1"})
    assert result == CommandResult(("sbatch", "--parsable"), 0, "42\n", "")
    assert module.calls == [
        (
            ["sbatch", "--parsable"],
            {"data": "#!/bin/sh\n", "environ_update": {"A": "1"}, "check_rc": False},
        )
    ]
    assert SlurmRunner(module).which("sbatch") is None


# The one source of the Slurm client, of the NVIDIA driver reader, of which device file is
# which GPU and of the reader of Slurm's GPU environment: the collection's module_utils (a git
# install of the collection has them); the payload's modules are links to them, which the
# wheel build resolves.
SLURM_CLIENT = REPO / "payload/src/gpulab/submit/slurm_client.py"
NVIDIA_DRIVER = REPO / "payload/src/gpulab/placement/nvidia_driver.py"
GPU_FILES = REPO / "payload/src/gpulab/placement/gpu_files.py"
SLURM_GPU_ENV = REPO / "payload/src/gpulab/placement/slurm_gpu_env.py"
SHARED = [SLURM_CLIENT, NVIDIA_DRIVER, GPU_FILES, SLURM_GPU_ENV]
COLLECTION = REPO / "collections/ansible_collections/gpulab/cluster"


@pytest.mark.parametrize("link", SHARED, ids=lambda p: p.name)
def test_the_payloads_shared_modules_are_links_to_the_collections(link: Path) -> None:
    source = COLLECTION / "plugins/module_utils" / link.name
    assert link.is_symlink(), f"{link.relative_to(REPO)}: a link to {source.relative_to(REPO)}"
    assert link.resolve() == source.resolve()
    assert not source.is_symlink(), "ansible-galaxy skips links: the collection holds the file"


@pytest.mark.parametrize("link", SHARED, ids=lambda p: p.name)
def test_a_shared_module_imports_what_both_sides_have(link: Path) -> None:
    """Python 3.8's syntax (ansible-core's oldest target Python), the standard library, and
    other shared modules only, relatively: the sibling the link's folder holds in the payload,
    the module_utils file in the collection."""
    tree = ast.parse(link.read_text(), feature_version=(3, 8))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            assert node.level == 1 and node.module, ast.unparse(node)
            sibling = link.with_name(f"{node.module}.py")
            assert sibling in SHARED and sibling.parent == link.parent, ast.unparse(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            top = {str(name).split(".")[0] for name in names}
            assert top <= sys.stdlib_module_names | {"__future__"}, ast.unparse(node)


def test_the_wheel_ships_the_slurm_client_as_a_module_of_gpulab_submit() -> None:
    from gpulab.submit import slurm_client  # noqa: PLC0415 - the payload, not the copy
    from setuptools import find_packages  # noqa: PLC0415 - as pyproject.toml finds them

    assert Path(slurm_client.__file__) == SLURM_CLIENT
    assert "gpulab.submit" in find_packages(str(REPO / "payload/src"))


def test_the_payload_imports_the_shared_device_files_module_through_its_link() -> None:
    # gpu_files imports nvidia_driver relatively: in the payload that is the payload's link.
    from gpulab.placement import gpu_files, nvidia_driver  # noqa: PLC0415 - the payload's

    assert Path(gpu_files.__file__) == GPU_FILES
    assert gpu_files.nvidia_gpus is nvidia_driver.nvidia_gpus


def test_the_payload_reads_slurms_gpu_environment_through_the_shared_module() -> None:
    from gpulab.placement import slurm_gpu_env, slurm_gpus  # noqa: PLC0415 - the payload's

    assert Path(slurm_gpu_env.__file__) == SLURM_GPU_ENV
    assert slurm_gpus.id_variable is slurm_gpu_env.id_variable


def test_ansible_ships_the_slurm_client_with_the_module(tmp_path: Path) -> None:
    # Check mode runs no Slurm command: sbatch only has to be found on PATH.
    (tmp_path / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "sbatch").chmod(0o755)
    env = ansible_env()
    env["PATH"] = f"{tmp_path}{os.pathsep}{env['PATH']}"
    argv = ["ansible", "localhost", "--check", "-o", "-m", "gpulab.cluster.slurm_job"]
    done = subprocess.run(
        [*argv, "-a", "command=true gres=gpu:1 chdir=/tmp"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reported = json.loads(done.stdout.split(" => ", 1)[1])
    sbatch = str(tmp_path / "sbatch")
    assert reported["cmd"] == [sbatch, "--parsable", "--gres=gpu:1", "--chdir=/tmp", "--wrap=true"]


def ansible_env() -> dict[str, str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_ansible_doc_reads_the_module_documentation() -> None:
    doc = subprocess.run(
        ["ansible-doc", "--json", "gpulab.cluster.slurm_job"],
        cwd=REPO,
        env=ansible_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    module = json.loads(doc.stdout)["gpulab.cluster.slurm_job"]
    assert set(module["doc"]["options"]) == set(slurm_job.ARGUMENT_SPEC)
    assert {"job_id", "state", "exit_code", "output_path"} <= set(module["return"])


def test_build_packs_the_roles_and_the_module(tmp_path: Path) -> None:
    env = ansible_env() | {"GPULAB_COLLECTION_OUT": str(tmp_path)}
    subprocess.run(
        ["bash", "scripts/build-collection.sh"], cwd=REPO, env=env, capture_output=True, check=True
    )
    # Named by galaxy.yml's version: the one build there is.
    (built,) = tmp_path.glob("gpulab-cluster-*.tar.gz")
    with tarfile.open(built) as tarball:
        names = set(tarball.getnames())
        for source in SHARED:
            packed = tarball.extractfile(f"plugins/module_utils/{source.name}")
            assert packed is not None
            assert packed.read() == source.read_bytes()
    assert {
        "roles/identity/tasks/main.yml",
        "roles/munge/tasks/main.yml",
        "roles/slurm/tasks/main.yml",
        "roles/slurm/meta/argument_specs.yml",
        "plugins/modules/slurm_job.py",
        "plugins/module_utils/slurm_runner.py",
        "plugins/module_utils/slurm_client.py",
        "meta/runtime.yml",
        "LICENSE",
    } <= names
