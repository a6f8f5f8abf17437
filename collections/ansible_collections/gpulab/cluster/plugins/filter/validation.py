# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Filter gpulab.cluster.validation_summary: one worker's validation job, judged."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_client import (
    gres_gpu_count,
    parse_scontrol,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_gpu_env import id_variable

DOCUMENTATION = r"""
---
name: validation_summary
short_description: Judge one worker's validation results (node.json of playbooks/validate.yml)
description:
  - Takes the node.json that the validation job wrote on a worker and returns its table row and
    every check with whether it passed and why not.
version_added: "1.0.0"
author: gpulab contributors (@gpulab)
options:
  _input:
    description: The parsed node.json.
    type: dict
    required: true
  node:
    description: The worker the job was meant to run on.
    type: str
    required: true
  reference:
    description:
      - Another worker's parsed node.json (an x86_64 worker's, to judge an arm64 worker). Each
        example graph's outputs must then agree with that worker's within 1e-3 of the output's
        magnitude. Ignored when it is this worker's own.
    type: dict
    required: false
  gres:
    description:
      - The GRES the job asked for, e.g. C(gpu:1). When it names GPUs, a check requires that
        Slurm gave the job at least that many.
    type: str
    required: false
    default: ""
"""

EXAMPLES = r"""
- name: Judge a worker's results
  ansible.builtin.debug:
    msg: "{{ node_json | gpulab.cluster.validation_summary('worker1') }}"

- name: Judge an arm64 worker's results, its graph outputs against worker1's
  ansible.builtin.debug:
    msg: "{{ arm_json | gpulab.cluster.validation_summary('arm1', worker1_json) }}"
"""

RETURN = r"""
_value:
  description:
    - node, arch, device, backend, passed, total, max_rel_err, saxpy_gbps;
    - gres, the GRES Slurm gave the job (C(scontrol show job -d)), "-" for none;
    - ran_on, the device the example graphs ran on, and whether that is the allocated GPU;
    - checks, each with check, ok and detail.
  type: dict
"""


def _check(checks: list[dict[str, Any]], name: str, ok: bool, detail: str) -> None:
    checks.append({"check": name, "ok": bool(ok), "detail": detail})


def _failed_step(step: dict[str, Any]) -> str:
    tail = " | ".join(step.get("stderr") or [])
    return f"exit {step.get('rc')}: {tail}" if tail else f"exit {step.get('rc')}"


def _judge_selftest(
    checks: list[dict[str, Any]], errors: list[float], step: dict[str, Any], label: str
) -> dict[str, Any]:
    report: dict[str, Any] = step.get("result") or {}
    for item in report.get("checks", []):
        errors.append(float(item.get("max_rel_err") or 0.0))
        _check(
            checks,
            f"{label} {item.get('op')} n={item.get('n')}",
            item.get("ok"),
            f"max_rel_err {item.get('max_rel_err')}",
        )
    _check(
        checks,
        label,
        step.get("rc") == 0 and report.get("ok") is True,
        "ok" if report.get("ok") else _failed_step(step),
    )
    return report


# Two workers' float32 results differ in rounding (vector widths, reduction order): an
# output agrees when each number is within this fraction of the output's magnitude.
AGREEMENT_RTOL = 1e-3


def _numbers(output: dict[str, Any]) -> tuple[list[float], float]:
    """An output's comparable numbers (value, or summary then data) and its magnitude."""
    if "value" in output:
        value = float(output["value"])
        return [value], abs(value)
    summary = output.get("summary") or {}
    numbers = [float(summary[k]) for k in ("sum", "min", "max", "l2") if k in summary]
    data = output.get("data")
    while isinstance(data, list) and data and isinstance(data[0], list):
        data = [x for row in data for x in row]
    numbers += [float(x) for x in data or []]
    scale = max([abs(float(summary.get(k, 0.0))) for k in ("min", "max", "l2")], default=0.0)
    return numbers, scale


def _output_mismatch(mine: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """Why two results of one output disagree, or None when they agree."""
    a, scale_a = _numbers(mine)
    b, scale_b = _numbers(theirs)
    if len(a) != len(b) or mine.get("shape") != theirs.get("shape"):
        return f"shape {mine.get('shape')} vs {theirs.get('shape')}"
    scale = max(scale_a, scale_b, 1e-6)  # a floor: outputs near zero compare absolutely
    worst = max((abs(x - y) / scale for x, y in zip(a, b, strict=True)), default=0.0)
    return None if worst <= AGREEMENT_RTOL else f"differs by {worst:.3g} of its magnitude"


def _judge_agreement(
    checks: list[dict[str, Any]], steps: dict[str, Any], reference: dict[str, Any]
) -> None:
    """Each example graph's outputs against the reference worker's."""
    other = f"{reference.get('node')} ({reference.get('arch', '?')})"
    theirs_steps: dict[str, Any] = reference.get("steps", {})
    for name in sorted(s for s in steps if s.startswith("run-")):
        mine = (steps[name].get("result") or {}).get("outputs") or {}
        if name not in theirs_steps and f"skip-{name[4:]}" in theirs_steps:
            continue  # the reference worker skipped that graph (no GLSL compiler there)
        theirs = (theirs_steps.get(name, {}).get("result") or {}).get("outputs") or {}
        if not mine or not theirs:
            ok, detail = False, f"no outputs to compare ({'theirs' if mine else 'ours'} missing)"
        else:
            problems = [
                f"{out}: {why}"
                for out in sorted(set(mine) | set(theirs))
                if (why := _output_mismatch(mine.get(out, {}), theirs.get(out, {}))) is not None
            ]
            ok = not problems
            detail = (
                f"{len(mine)} output(s) within {AGREEMENT_RTOL:g} of {other}'s"
                if ok
                else "; ".join(problems)
            )
        _check(checks, f"{name[4:]} same as {other}", ok, detail)


def _given_gres(result: dict[str, Any]) -> str:
    """The GRES Slurm gave the job, from the `scontrol show job -o -d` it recorded, else from
    the GPU ids Slurm exported to it (the variable the payload reads them from); "" for none."""
    slurm: dict[str, Any] = result.get("slurm") or {}
    job = parse_scontrol(slurm.get("job") or "")
    if job is not None and job.gres:
        return job.gres
    env: dict[str, str] = slurm.get("env") or {}
    variable = id_variable(env)
    if variable is None:
        return ""
    gpus = env[variable].strip()
    return f"gpu:{len(gpus.split(','))}(IDX:{gpus})"


def _ran_on(steps: dict[str, Any], gres: str) -> str:
    """The device of the example graphs' runs, saying when it is not a GPU Slurm allocated."""
    runs = [steps[name].get("result") or {} for name in sorted(steps) if name.startswith("run-")]
    device = next((run["device"] for run in runs if run.get("device")), None)
    if device is None:
        return "-"
    text = f"{device.get('name', '?')} ({device.get('type', '?')})"
    if device.get("type") != "cpu":
        return text
    if gres_gpu_count(gres) > 0:
        return f"{text}: cpu device, not the GPU Slurm gave"
    return f"{text}: cpu device (no GRES)"


def validation_summary(
    result: dict[str, Any], node: str, reference: dict[str, Any] | None = None, gres: str = ""
) -> dict[str, Any]:
    """The table row of one worker and each of its checks; with another worker's results as
    reference, also whether every example graph's outputs agree with that worker's; with the
    GRES the job asked for, whether Slurm gave it."""
    steps: dict[str, Any] = result.get("steps", {})
    checks: list[dict[str, Any]] = []
    errors: list[float] = []
    given = _given_gres(result)
    _check(checks, "ran on its node", result.get("node") == node, f"ran on {result.get('node')}")
    if gres_gpu_count(gres) > 0:
        _check(
            checks,
            f"Slurm gave {gres}",
            gres_gpu_count(given) >= gres_gpu_count(gres),
            f"given {given or 'no GRES'}",
        )

    devices = steps.get("devices", {})
    listed = devices.get("result") or []
    _check(
        checks,
        "devices",
        devices.get("rc") == 0 and len(listed) > 0,
        f"{len(listed)} Vulkan device(s)" if devices.get("rc") == 0 else _failed_step(devices),
    )

    # `gpulab health`, the Slurm health check's own test (device there, exact saxpy).
    if "health" in steps:
        health = steps["health"]
        verdict = health.get("result") or {}
        failing = [c for c in verdict.get("checks", []) if not c.get("ok")]
        _check(
            checks,
            "gpulab health",
            health.get("rc") == 0 and verdict.get("ok") is True,
            f"{verdict.get('elapsed_ms', 0):.0f} ms"
            if health.get("rc") == 0
            else (
                f"{failing[0]['check']}: {failing[0]['detail']}"
                if failing
                else _failed_step(health)
            ),
        )

    # The default backend's selftest (Vulkan where a device exists), then the native one's.
    report = _judge_selftest(checks, errors, steps.get("selftest", {}), "selftest")
    if "selftest-native" in steps:
        _judge_selftest(checks, errors, steps["selftest-native"], "selftest native")

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

    # A graph with GLSL kernels on a worker without a GLSL compiler: skipped, not failed.
    for name in sorted(s for s in steps if s.startswith("skip-")):
        reason = " | ".join(steps[name].get("stderr") or []) or "skipped"
        _check(checks, f"{name[5:]} skipped", True, reason)

    if reference is not None and reference.get("node") != result.get("node"):
        _judge_agreement(checks, steps, reference)

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
        "gres": given or "-",
        "ran_on": _ran_on(steps, given),
        "checks": checks,
    }


class FilterModule:
    """gpulab.cluster's filters."""

    def filters(self) -> dict[str, Any]:
        return {"validation_summary": validation_summary}
