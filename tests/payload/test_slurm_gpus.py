"""The GPUs Slurm gave a job: ids from the environment, files from gres.conf (pure parsing)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from gpulab.placement.slurm_gpus import (
    GresGpu,
    SlurmGpus,
    expand_hostlist,
    gres_conf_path,
    parse_gres_conf,
    read_allocation,
    shards_given,
)

# What the slurm role writes for a worker with two H200s and what a hand-written one may hold.
GRES_CONF = """\
# gres.conf written by gpulab.cluster.slurm
NodeName=worker1 Name=gpu Type=h200 File=/dev/nvidia[0-1]
NodeName=worker[2-3] Name=gpu Type=llvmpipe File=/dev/dri/renderD128
nodename=worker4 name=gpu type=orin file=/dev/nvgpu/igpu0/ctrl   # keys in any case
NodeName=worker5 Name=gpu File=/dev/nvidia[0,2-3]
NodeName=worker1 Name=mps Count=100
Name=gpu Type=a100 File=/dev/nvidia7
"""


def files(node: str) -> list[tuple[int, str, str | None]]:
    return [(gpu.id, gpu.file, gpu.type) for gpu in parse_gres_conf(GRES_CONF, node)]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("/dev/nvidia[0-3]", ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3"]),
        ("/dev/nvidia[0,2-3]", ["/dev/nvidia0", "/dev/nvidia2", "/dev/nvidia3"]),
        ("node[01-02,7],gpu1", ["node01", "node02", "node7", "gpu1"]),
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("rack[1-2]n[3-4]", ["rack1n3", "rack1n4", "rack2n3", "rack2n4"]),
        ("/dev/nvidia0,/dev/nvidia1", ["/dev/nvidia0", "/dev/nvidia1"]),
        ("worker1", ["worker1"]),
    ],
)
def test_hostlists_expand_in_order(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["/dev/nvidia[0-3", "/dev/nvidia[a-b]", "/dev/nvidia]0["])
def test_a_broken_hostlist_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="cannot expand"):
        expand_hostlist(text)


def test_each_node_gets_its_own_lines_and_the_lines_without_a_node_name() -> None:
    assert files("worker1") == [
        (0, "/dev/nvidia0", "h200"),
        (1, "/dev/nvidia1", "h200"),
        (7, "/dev/nvidia7", "a100"),
    ]
    assert files("worker3") == [
        (128, "/dev/dri/renderD128", "llvmpipe"),
        (7, "/dev/nvidia7", "a100"),
    ]
    assert files("elsewhere") == [(7, "/dev/nvidia7", "a100")]


def test_the_global_id_is_the_number_ending_the_file_name() -> None:
    assert [gpu.id for gpu in parse_gres_conf(GRES_CONF, "worker5")] == [0, 2, 3, 7]


def test_files_without_a_number_are_numbered_after_the_largest_like_slurmd() -> None:
    text = "Name=gpu File=/dev/nvgpu/igpu0/ctrl\nName=gpu File=/dev/nvidia3\nName=gpu File=/dev/x\n"
    assert parse_gres_conf(text, "n") == [
        GresGpu(4, "/dev/nvgpu/igpu0/ctrl", None),
        GresGpu(3, "/dev/nvidia3", None),
        GresGpu(5, "/dev/x", None),
    ]
    # A Jetson's one GPU node carries no number: it is id 0, what SLURM_JOB_GPUS then holds.
    assert [gpu.id for gpu in parse_gres_conf(GRES_CONF, "worker4")] == [8, 7]
    orin_only = "NodeName=orin1 Name=gpu Type=orin File=/dev/nvgpu/igpu0/ctrl\n"
    assert parse_gres_conf(orin_only, "orin1") == [GresGpu(0, "/dev/nvgpu/igpu0/ctrl", "orin")]


def test_gres_conf_lies_beside_slurm_conf() -> None:
    assert gres_conf_path({}) == Path("/etc/slurm/gres.conf")
    conf = {"SLURM_CONF": "/var/spool/slurmd/conf-cache/slurm.conf"}
    assert gres_conf_path(conf) == Path("/var/spool/slurmd/conf-cache/gres.conf")


def reader(text: str | None) -> Callable[[Path], str]:
    """gres.conf's text (None: there is none), read from where it should be."""

    def read(path: Path) -> str:
        if text is None:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        assert path == Path("/etc/slurm/gres.conf")
        return text

    return read


def test_outside_a_job_with_gpus_there_is_no_allocation() -> None:
    assert read_allocation({}, reader(GRES_CONF)) is None
    assert read_allocation({"SLURM_JOB_GPUS": ""}, reader(GRES_CONF)) is None


def test_the_job_gpus_map_to_their_files() -> None:
    env = {"SLURM_JOB_GPUS": "1,7", "SLURMD_NODENAME": "worker1"}
    gpus = read_allocation(env, reader(GRES_CONF))
    assert gpus is not None
    assert (gpus.variable, gpus.ids, gpus.files, gpus.problem) == (
        "SLURM_JOB_GPUS",
        (1, 7),
        ("/dev/nvidia1", "/dev/nvidia7"),
        None,
    )
    assert gpus.origin == "SLURM_JOB_GPUS=1,7"
    assert gpus.to_json() == {
        "variable": "SLURM_JOB_GPUS",
        "ids": [1, 7],
        "files": ["/dev/nvidia1", "/dev/nvidia7"],
        "gres_conf": "/etc/slurm/gres.conf",
    }


def test_a_step_gpus_win_over_the_job_and_cuda_visible_devices_is_ignored() -> None:
    env = {
        "SLURM_JOB_GPUS": "0,1",
        "SLURM_STEP_GPUS": "1",
        "CUDA_VISIBLE_DEVICES": "0",  # relative to the job's devices under ConstrainDevices
        "SLURMD_NODENAME": "worker1",
    }
    gpus = read_allocation(env, reader(GRES_CONF))
    assert gpus is not None
    assert (gpus.variable, gpus.files) == ("SLURM_STEP_GPUS", ("/dev/nvidia1",))


def test_an_id_without_a_file_is_a_problem_named_with_node_and_file() -> None:
    env = {"SLURM_JOB_GPUS": "0,3", "SLURMD_NODENAME": "worker1"}
    gpus = read_allocation(env, reader(GRES_CONF))
    assert gpus is not None
    assert gpus.files == ("/dev/nvidia0",)
    assert gpus.problem == "/etc/slurm/gres.conf has no gpu File= with id 3 for node worker1"


def test_no_gres_conf_or_no_device_files_are_problems_not_errors() -> None:
    missing = read_allocation({"SLURM_JOB_GPUS": "0"}, reader(None))
    assert missing is not None
    assert missing.problem == ("cannot read /etc/slurm/gres.conf: No such file or directory")
    no_files = read_allocation({"SLURM_JOB_GPUS": "NoDevFiles"}, reader(GRES_CONF))
    assert no_files is not None
    assert no_files.ids == ()
    assert no_files.problem is not None
    assert no_files.problem.startswith("SLURM_JOB_GPUS=NoDevFiles names no GPU ids")
    broken = read_allocation({"SLURM_JOB_GPUS": "0"}, reader("Name=gpu File=/dev/nvidia[0-\n"))
    assert broken is not None
    assert broken.problem is not None
    assert broken.problem.startswith("/etc/slurm/gres.conf: cannot expand")


# Slurm 22.05's shards: n1 shares its one H100, n2 each of its two.
SHARD_CONF = """\
NodeName=n1 Name=gpu Type=h100 File=/dev/nvidia0
NodeName=n1 Name=shard Count=4 File=/dev/nvidia0
NodeName=n2 Name=gpu Type=h100 File=/dev/nvidia[0-1]
NodeName=n2 Name=shard Count=4 File=/dev/nvidia0
NodeName=n2 Name=shard Count=4 File=/dev/nvidia1
NodeName=n3 Name=gpu File=/dev/nvidia0
"""


def shard_job(node: str, shards: str = "1", **ids: str) -> dict[str, str]:
    """What the gres/shard plugin sets; CUDA_VISIBLE_DEVICES counts from 0 and is not read."""
    env = {"SLURM_SHARDS_ON_NODE": shards, "SLURMD_NODENAME": node}
    return env | {"CUDA_VISIBLE_DEVICES": "0", "GPU_DEVICE_ORDINAL": "0", "SLURM_JOB_ID": "9"} | ids


@pytest.mark.parametrize(("text", "count"), [("1", 1), (" 4 ", 4), ("0", None), ("x", None)])
def test_shards_count_only_above_0(text: str, count: int | None) -> None:
    assert shards_given({"SLURM_SHARDS_ON_NODE": text}) == count
    assert shards_given({}) is None


def test_shards_without_a_gpu_id_take_the_shard_lines_file() -> None:
    gpus = read_allocation(shard_job("n1"), reader(SHARD_CONF))
    assert gpus is not None
    assert (gpus.variable, gpus.ids, gpus.files, gpus.shards, gpus.problem) == (
        "SLURM_SHARDS_ON_NODE",
        (),
        ("/dev/nvidia0",),
        1,
        None,
    )
    assert gpus.kind == "shard"
    assert gpus.origin == "SLURM_SHARDS_ON_NODE=1, a GPU shared with other jobs"
    assert gpus.to_json() == {
        "variable": "SLURM_SHARDS_ON_NODE",
        "ids": [],
        "files": ["/dev/nvidia0"],
        "gres_conf": "/etc/slurm/gres.conf",
        "shards": 1,
    }


def test_several_gpus_with_shards_and_no_id_keep_every_file_in_order() -> None:
    gpus = read_allocation(shard_job("n2", "2"), reader(SHARD_CONF))
    assert gpus is not None
    assert (gpus.files, gpus.shards) == (("/dev/nvidia0", "/dev/nvidia1"), 2)
    one_line = "NodeName=n2 Name=shard Count=8 File=/dev/nvidia[0-1]\n"
    files = ("/dev/nvidia0", "/dev/nvidia1")
    assert read_allocation(shard_job("n2"), reader(one_line)) == SlurmGpus(
        "SLURM_SHARDS_ON_NODE", "1", (), files, "/etc/slurm/gres.conf", shards=1
    )


def test_shards_with_a_gpu_id_take_that_gpus_file() -> None:
    env = shard_job("n2", "2", SLURM_JOB_GPUS="1")
    gpus = read_allocation(env, reader(SHARD_CONF))
    assert gpus is not None
    assert (gpus.variable, gpus.ids, gpus.files, gpus.shards) == (
        "SLURM_JOB_GPUS",
        (1,),
        ("/dev/nvidia1",),
        2,
    )
    assert gpus.origin == "SLURM_SHARDS_ON_NODE=2, a GPU shared with other jobs, SLURM_JOB_GPUS=1"
    assert gpus.to_json()["shards"] == 2
    # A gres.conf with shard lines but no gpu lines (the GPUs autodetected) still names it.
    autodetected = "AutoDetect=nvml\nNodeName=n2 Name=shard Count=8 File=/dev/nvidia[0-1]\n"
    step = read_allocation(shard_job("n2", SLURM_STEP_GPUS="1"), reader(autodetected))
    assert step is not None
    assert (step.files, step.problem) == (("/dev/nvidia1",), None)
    unknown = read_allocation(shard_job("n1", SLURM_JOB_GPUS="5"), reader(SHARD_CONF))
    assert unknown is not None
    assert unknown.problem == (
        "/etc/slurm/gres.conf has no gpu or shard File= with id 5 for node n1"
    )


def test_shards_with_ids_that_are_no_numbers_fall_back_to_the_shard_lines() -> None:
    env = shard_job("n1", SLURM_JOB_GPUS="NoDevFiles")
    gpus = read_allocation(env, reader(SHARD_CONF))
    assert gpus is not None
    assert (gpus.variable, gpus.files, gpus.problem) == (
        "SLURM_SHARDS_ON_NODE",
        ("/dev/nvidia0",),
        None,
    )


def test_shards_without_a_shard_file_or_gres_conf_are_problems_not_errors() -> None:
    none = read_allocation(shard_job("n3"), reader(SHARD_CONF))
    assert none is not None
    assert (none.files, none.problem) == ((), "/etc/slurm/gres.conf has no shard File= for node n3")
    missing = read_allocation(shard_job("n1"), reader(None))
    assert missing is not None
    assert missing.problem == "cannot read /etc/slurm/gres.conf: No such file or directory"


@pytest.mark.parametrize("shards", ["0", "", "many"])
def test_gpu_ids_without_shards_read_as_before(shards: str) -> None:
    env = {"SLURM_JOB_GPUS": "0", "SLURM_SHARDS_ON_NODE": shards, "SLURMD_NODENAME": "n1"}
    gpus = read_allocation(env, reader(SHARD_CONF))
    assert gpus is not None
    assert (gpus.kind, gpus.shards, gpus.origin) == ("gres", None, "SLURM_JOB_GPUS=0")
    assert "shards" not in gpus.to_json()
    assert read_allocation({"SLURM_SHARDS_ON_NODE": shards}, reader(SHARD_CONF)) is None


REPO = Path(__file__).resolve().parents[2]
ENV_SOURCE = "collections/ansible_collections/gpulab/cluster/plugins/module_utils/slurm_gpu_env.py"


def test_one_source_reads_slurms_gpu_variables() -> None:
    """The payload (here) and the collection's validation filter read the allocated GPUs from
    the environment through module_utils/slurm_gpu_env.py (the payload's is a link to it): no
    other Python source of either names the variables in code (`gpulab --help` lists them)."""
    names = {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_SHARDS_ON_NODE", "CUDA_VISIBLE_DEVICES"}
    sources = []
    for root in ("collections/ansible_collections/gpulab/cluster/plugins", "payload/src"):
        for path in sorted((REPO / root).rglob("*.py")):
            if path.is_symlink() or path.name == "epilog.py":
                continue
            constants = {
                node.value
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
            }
            if constants & names:
                sources.append(path.relative_to(REPO).as_posix())
    assert sources == [ENV_SOURCE]
