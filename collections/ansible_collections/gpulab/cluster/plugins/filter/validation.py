# Copyright: gpulab contributors
# MIT License (see galaxy.yml)
"""Filter gpulab.cluster.validation_summary: one worker's validation job, judged."""

from __future__ import annotations

from typing import Any

DOCUMENTATION = r"""
---
name: validation_summary
short_description: Judge one worker's validation results (node.json of playbooks/validate.yml)
description:
  - Takes the node.json that the validation job wrote on a worker and returns its table row and
    every check with whether it passed and why not.
version_added: "1.0.0"
author: gpulab
options:
  _input:
    description: The parsed node.json.
    type: dict
    required: true
  node:
    description: The worker the job was meant to run on.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Judge a worker's results
  ansible.builtin.debug:
    msg: "{{ node_json | gpulab.cluster.validation_summary('worker1') }}"
"""

RETURN = r"""
_value:
  description:
    - node, arch, device, backend, passed, total, max_rel_err, saxpy_gbps;
    - checks, each with check, ok and detail.
  type: dict
"""


def _check(checks: list[dict[str, Any]], name: str, ok: bool, detail: str) -> None:
    checks.append({"check": name, "ok": bool(ok), "detail": detail})


def _failed_step(step: dict[str, Any]) -> str:
    tail = " | ".join(step.get("stderr") or [])
    return f"exit {step.get('rc')}: {tail}" if tail else f"exit {step.get('rc')}"


def validation_summary(result: dict[str, Any], node: str) -> dict[str, Any]:
    """The table row of one worker and each of its checks."""
    steps: dict[str, Any] = result.get("steps", {})
    checks: list[dict[str, Any]] = []
    errors: list[float] = []
    _check(checks, "ran on its node", result.get("node") == node, f"ran on {result.get('node')}")

    devices = steps.get("devices", {})
    listed = devices.get("result") or []
    _check(
        checks,
        "devices",
        devices.get("rc") == 0 and len(listed) > 0,
        f"{len(listed)} Vulkan device(s)" if devices.get("rc") == 0 else _failed_step(devices),
    )

    selftest = steps.get("selftest", {})
    report = selftest.get("result") or {}
    for item in report.get("checks", []):
        errors.append(float(item.get("max_rel_err") or 0.0))
        _check(
            checks,
            f"selftest {item.get('op')} n={item.get('n')}",
            item.get("ok"),
            f"max_rel_err {item.get('max_rel_err')}",
        )
    _check(
        checks,
        "selftest",
        selftest.get("rc") == 0 and report.get("ok") is True,
        "ok" if report.get("ok") else _failed_step(selftest),
    )

    for name in sorted(s for s in steps if s.startswith("run-")):
        run = steps[name]
        compare = (run.get("result") or {}).get("compare") or {}
        worst = max((float(v) for v in (compare.get("max_rel_err") or {}).values()), default=0.0)
        errors.append(worst)
        _check(
            checks,
            f"{name[4:]} --compare cpu",
            run.get("rc") == 0 and compare.get("ok") is True,
            f"max_rel_err {worst:.3g}" if run.get("rc") == 0 else _failed_step(run),
        )

    bench = steps.get("bench", {})
    rows = [r for r in bench.get("result") or [] if r.get("op") == "saxpy"]
    gbps = float(rows[0]["gbps"]) if rows else None
    _check(
        checks,
        "bench saxpy",
        bench.get("rc") == 0 and gbps is not None and gbps > 0,
        f"{gbps:.2f} GB/s" if gbps is not None else _failed_step(bench),
    )

    device = report.get("device") or (listed[0] if listed else {})
    return {
        "node": node,
        "arch": result.get("arch", "?"),
        "job_id": result.get("job_id"),
        "device": device.get("name", "none"),
        "backend": report.get("backend", "?"),
        "passed": sum(1 for c in checks if c["ok"]),
        "total": len(checks),
        "max_rel_err": max(errors, default=0.0),
        "saxpy_gbps": gbps,
        "checks": checks,
    }


class FilterModule:
    """gpulab.cluster's filters."""

    def filters(self) -> dict[str, Any]:
        return {"validation_summary": validation_summary}
