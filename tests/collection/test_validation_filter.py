"""gpulab.cluster.validation_summary: a worker's results judged check by check."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpulab.cluster.plugins.filter.slurm_gpus import (
    FilterModule as SlurmFilters,
)
from ansible_collections.gpulab.cluster.plugins.filter.validation import (
    FilterModule,
    validation_summary,
)

DEVICE = {"name": "llvmpipe (LLVM 15.0.6, 256 bits)", "type": "cpu"}


def node_json(**steps: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "devices": {"rc": 0, "result": [DEVICE], "stderr": []},
        "selftest": {
            "rc": 0,
            "result": {
                "ok": True,
                "backend": "vulkan",
                "device": DEVICE,
                "checks": [{"op": "saxpy", "n": 1000, "ok": True, "max_rel_err": 1e-7}],
            },
            "stderr": [],
        },
        "run-saxpy_norm": {
            "rc": 0,
            "result": {"compare": {"ok": True, "max_rel_err": {"s": 0.0, "n": 3e-6}}},
            "stderr": [],
        },
        "bench": {"rc": 0, "result": [{"op": "saxpy", "gbps": 2.5}], "stderr": []},
    }
    base.update(steps)
    return {"node": "worker1", "arch": "x86_64", "job_id": "7", "steps": base}


def test_a_good_node_passes_every_check() -> None:
    summary = validation_summary(node_json(), "worker1")
    assert [c["check"] for c in summary["checks"]] == [
        "ran on its node",
        "devices",
        "selftest saxpy n=1000",
        "selftest",
        "saxpy_norm --compare cpu",
        "bench saxpy",
    ]
    assert (summary["passed"], summary["total"]) == (6, 6)
    assert summary["max_rel_err"] == 3e-6
    assert summary["saxpy_gbps"] == 2.5
    assert (summary["device"], summary["backend"], summary["arch"]) == (
        DEVICE["name"],
        "vulkan",
        "x86_64",
    )


def test_a_failed_run_names_the_check_and_the_error() -> None:
    failed = {"rc": 4, "result": None, "stderr": ["gpulab: device lost"]}
    summary = validation_summary(node_json(**{"run-saxpy_norm": failed}), "worker1")
    bad = [c for c in summary["checks"] if not c["ok"]]
    assert bad == [
        {"check": "saxpy_norm --compare cpu", "ok": False, "detail": "exit 4: gpulab: device lost"}
    ]


SKIPPED = {
    "rc": 0,
    "result": None,
    "stderr": [
        "skipped: user_kernels.json has GLSL kernels (.comp) and there is no GLSL compiler on "
        "this worker (glslc or glslangValidator; the vulkan role installs glslc)"
    ],
}


def test_a_graph_skipped_for_want_of_a_glsl_compiler_passes_and_says_why() -> None:
    summary = validation_summary(node_json(**{"skip-user_kernels": SKIPPED}), "worker1")
    checks = {c["check"]: c for c in summary["checks"]}
    assert checks["user_kernels skipped"]["ok"] is True
    assert "no GLSL compiler on this worker" in checks["user_kernels skipped"]["detail"]
    assert summary["passed"] == summary["total"]


def test_a_graph_the_reference_worker_skipped_is_not_compared() -> None:
    outputs = {"total": {"type": "scalar", "value": 1.0}}
    ran = {"rc": 0, "result": {"compare": {"ok": True}, "outputs": outputs}, "stderr": []}
    mine = node_json(**{"run-user_kernels": ran})
    theirs = node_json(**{"skip-user_kernels": SKIPPED})
    theirs["node"] = "worker2"
    names = [c["check"] for c in validation_summary(mine, "worker1", theirs)["checks"]]
    assert "user_kernels --compare cpu" in names
    assert not [n for n in names if n.startswith("user_kernels same as")]


def test_gpulab_health_is_judged_when_the_job_ran_it() -> None:
    healthy = {"rc": 0, "result": {"ok": True, "checks": [], "elapsed_ms": 212.4}, "stderr": []}
    summary = validation_summary(node_json(health=healthy), "worker1")
    assert {"check": "gpulab health", "ok": True, "detail": "212 ms"} in summary["checks"]
    lost = {
        "rc": 3,
        "result": {
            "ok": False,
            "device": None,
            "checks": [{"check": "device", "ok": False, "detail": "no Vulkan device was found"}],
            "elapsed_ms": 5.0,
        },
        "stderr": ["gpulab health: device: no Vulkan device was found"],
    }
    bad = [
        c for c in validation_summary(node_json(health=lost), "worker1")["checks"] if not c["ok"]
    ]
    assert bad == [
        {"check": "gpulab health", "ok": False, "detail": "device: no Vulkan device was found"}
    ]


def test_a_job_on_the_wrong_node_fails() -> None:
    summary = validation_summary(node_json(), "worker2")
    assert summary["checks"][0] == {
        "check": "ran on its node",
        "ok": False,
        "detail": "ran on worker1",
    }


def test_the_filter_is_registered() -> None:
    assert FilterModule().filters() == {"validation_summary": validation_summary}


def test_the_gres_filter_counts_gpus() -> None:
    assert SlurmFilters().filters()["slurm_gpus"]("gpu:orin:1") == 1


GIVEN_GPU = (
    "JobId=7 JobState=RUNNING ExitCode=0:0 NodeList=gpu1 JOB_GRES=gpu:h200:1 "
    "Nodes=gpu1 CPU_IDs=0 Mem=0 GRES=gpu:h200:1(IDX:0)"
)
H200 = {"name": "NVIDIA H200", "type": "discrete"}


def _ran(device: dict[str, str]) -> dict[str, Any]:
    result = {"compare": {"ok": True, "max_rel_err": {"s": 0.0}}, "device": device}
    return {"run-saxpy_norm": {"rc": 0, "result": result, "stderr": []}}


def test_lavapipe_without_gres_says_so() -> None:
    summary = validation_summary(node_json(**_ran(DEVICE)), "worker1")
    assert summary["gres"] == "-"
    assert summary["ran_on"] == f"{DEVICE['name']} (cpu): cpu device (no GRES)"


def test_the_gres_given_and_the_gpu_the_graphs_ran_on() -> None:
    result = node_json(**_ran(H200)) | {"slurm": {"job": GIVEN_GPU, "env": {}}}
    summary = validation_summary(result, "worker1", gres="gpu:1")
    assert (summary["gres"], summary["ran_on"]) == ("gpu:h200:1(IDX:0)", "NVIDIA H200 (discrete)")
    assert summary["checks"][1] == {
        "check": "Slurm gave gpu:1",
        "ok": True,
        "detail": "given gpu:h200:1(IDX:0)",
    }


def test_a_gpu_given_but_a_cpu_device_used_is_named() -> None:
    # The Jetson stand-in: Slurm gives its Tegra GRES, the graphs run on lavapipe.
    result = node_json(**_ran(DEVICE)) | {"slurm": {"job": "", "env": {"SLURM_JOB_GPUS": "0"}}}
    summary = validation_summary(result, "worker1", gres="gpu:1")
    assert summary["gres"] == "gpu:1(IDX:0)"
    assert summary["ran_on"].endswith(": cpu device, not the GPU Slurm gave")


def test_the_given_gpus_are_read_from_the_variable_the_payload_reads() -> None:
    """The step's ids before the job's, as gpulab.placement.slurm_gpus picks them (both read
    module_utils/slurm_gpu_env.py); an empty variable is none."""
    env = {"SLURM_STEP_GPUS": "1", "SLURM_JOB_GPUS": "0,1"}
    result = node_json(**_ran(DEVICE)) | {"slurm": {"job": "", "env": env}}
    assert validation_summary(result, "worker1")["gres"] == "gpu:1(IDX:1)"
    result["slurm"]["env"] = {"SLURM_STEP_GPUS": " ", "SLURM_JOB_GPUS": "0,1"}
    assert validation_summary(result, "worker1")["gres"] == "gpu:2(IDX:0,1)"
    result["slurm"]["env"] = {"SLURM_JOB_GPUS": ""}
    assert validation_summary(result, "worker1")["gres"] == "-"


def test_a_gpu_asked_for_and_not_given_fails() -> None:
    summary = validation_summary(node_json(), "worker1", gres="gpu:1")
    assert summary["checks"][1] == {
        "check": "Slurm gave gpu:1",
        "ok": False,
        "detail": "given no GRES",
    }
    assert summary["ran_on"] == "-"
