"""gpulab.cluster.validation_summary with a reference worker: an arm64 worker's native
selftest is judged, and its example graphs' outputs must agree with an x86_64 worker's."""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.gpulab.cluster.plugins.filter.validation import validation_summary

DEVICE = {"name": "llvmpipe (LLVM 15.0.6, 128 bits)", "type": "cpu"}


def selftest(backend: str) -> dict[str, Any]:
    checks = [{"op": "sum", "n": 4096, "ok": True, "max_rel_err": 2e-7}]
    report = {"ok": True, "backend": backend, "device": DEVICE, "checks": checks}
    return {"rc": 0, "result": report, "stderr": []}


def run(norm: float, data: list[float]) -> dict[str, Any]:
    outputs = {
        "n": {"type": "scalar", "value": norm},
        "x": {
            "type": "vector",
            "shape": [len(data)],
            "summary": {"sum": sum(data), "min": min(data), "max": max(data), "l2": norm},
            "data": data,
        },
    }
    return {"rc": 0, "result": {"outputs": outputs, "compare": {"ok": True}}, "stderr": []}


def node_json(
    node: str, arch: str, norm: float = 5.0, data: tuple[float, ...] = (3.0, 4.0)
) -> dict[str, Any]:
    steps = {
        "devices": {"rc": 0, "result": [DEVICE], "stderr": []},
        "selftest": selftest("vulkan"),
        "selftest-native": selftest("native"),
        "run-jacobi": run(norm, list(data)),
        "bench": {"rc": 0, "result": [{"op": "saxpy", "gbps": 0.5}], "stderr": []},
    }
    return {"node": node, "arch": arch, "job_id": "9", "steps": steps}


X86 = node_json("worker1", "x86_64")


def test_an_arm_worker_that_agrees_passes_every_check() -> None:
    arm = node_json("arm1", "aarch64", norm=5.0000001, data=(3.0000002, 4.0))
    summary = validation_summary(arm, "arm1", X86)
    assert [c["check"] for c in summary["checks"]] == [
        "ran on its node",
        "devices",
        "selftest sum n=4096",
        "selftest",
        "selftest native sum n=4096",
        "selftest native",
        "jacobi --compare cpu",
        "jacobi same as worker1 (x86_64)",
        "bench saxpy",
    ]
    assert (summary["passed"], summary["total"], summary["arch"]) == (9, 9, "aarch64")
    assert summary["checks"][7]["detail"] == "2 output(s) within 0.001 of worker1 (x86_64)'s"


def test_an_output_that_differs_names_the_graph_and_the_output() -> None:
    arm = node_json("arm1", "aarch64", norm=5.1)
    failed = [c for c in validation_summary(arm, "arm1", X86)["checks"] if not c["ok"]]
    assert [c["check"] for c in failed] == ["jacobi same as worker1 (x86_64)"]
    assert failed[0]["detail"].startswith("n: differs by 0.0196")
    assert "x: differs" in failed[0]["detail"]


def test_a_missing_graph_result_fails_the_agreement() -> None:
    arm = node_json("arm1", "aarch64")
    arm["steps"]["run-jacobi"] = {"rc": 1, "result": None, "stderr": ["boom"]}
    checks = {c["check"]: c for c in validation_summary(arm, "arm1", X86)["checks"]}
    assert checks["jacobi same as worker1 (x86_64)"]["ok"] is False
    assert "ours missing" in checks["jacobi same as worker1 (x86_64)"]["detail"]


def test_a_different_shape_fails_the_agreement() -> None:
    arm = node_json("arm1", "aarch64", data=(3.0, 4.0, 0.0))
    checks = {c["check"]: c for c in validation_summary(arm, "arm1", X86)["checks"]}
    assert "shape [3] vs [2]" in checks["jacobi same as worker1 (x86_64)"]["detail"]


def test_the_reference_worker_is_not_compared_with_itself() -> None:
    summary = validation_summary(copy.deepcopy(X86), "worker1", X86)
    assert not any("same as" in c["check"] for c in summary["checks"])


def test_a_failed_native_selftest_is_its_own_check() -> None:
    arm = node_json("arm1", "aarch64")
    arm["steps"]["selftest-native"] = {"rc": 2, "result": None, "stderr": ["NativeUnavailable"]}
    failed = [c for c in validation_summary(arm, "arm1", X86)["checks"] if not c["ok"]]
    assert failed == [
        {"check": "selftest native", "ok": False, "detail": "exit 2: NativeUnavailable"}
    ]
