"""Jobs through the real Slurm that scripts/gpu-host/slurm.sh started on this GPU host.

Run as root from the repository root, after slurm.sh:
    /opt/gpulab-ansible/bin/python scripts/gpu-host/drills.py
In order: the validation job of playbooks/validate.yml (the script node-check.yml rendered) with
--gres=gpu:1; `gpulab submit --gpus 1`; a job given no GPU; N jobs on the GPU's shards at once
and `gpulab submit --shards 1`; the health check draining the node when NVIDIA's Vulkan driver
is hidden, resuming it when it is back, and leaving an admin's drain alone. Each check prints one
line; build/gpu-host/run/drills.{json,md} hold them all. Exit 1 when one failed.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "build/gpu-host/run"
GPULAB = "/opt/gpulab/venv/bin/gpulab"
JOB_USER = "gpulab"
SHARED = Path("/srv/gpulab/jobs")
GRAPH = REPO / "payload/examples/saxpy_norm.json"
ICD_DIRS = (
    Path("/etc/vulkan/icd.d"),
    Path("/usr/share/vulkan/icd.d"),
    Path("/usr/local/share/vulkan/icd.d"),
)
sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.gpulab.cluster.plugins.filter.validation import (  # noqa: E402
    validation_summary,
)

checks: list[dict[str, Any]] = []
figures: dict[str, Any] = {}


def check(drill: str, name: str, ok: bool, detail: str) -> bool:
    detail = "; ".join(line.strip() for line in detail.splitlines() if line.strip())
    checks.append({"drill": drill, "check": name, "ok": bool(ok), "detail": detail})
    print(f"{'ok  ' if ok else 'FAIL'} {drill}: {name}: {detail}", flush=True)
    return bool(ok)


def sh(argv: list[str], user: str | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    if user is not None:
        argv = [
            "runuser",
            "-u",
            user,
            "--",
            "env",
            f"PATH=/opt/gpulab/venv/bin:{os.environ['PATH']}",
            *argv,
        ]
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)


def node_name() -> str:
    for line in Path("/etc/slurm/nodes.conf").read_text().splitlines():
        if line.startswith("NodeName="):
            return line.split()[0].removeprefix("NodeName=")
    raise SystemExit("no NodeName in /etc/slurm/nodes.conf")


def node_state(node: str) -> tuple[str, str]:
    out = sh(["sinfo", "--noheader", "--Node", f"--nodes={node}", "--format=%t|%E"]).stdout
    state, _, reason = out.strip().partition("|")
    return state, reason


def wait_until(
    probe: Callable[[], Any], timeout: float, interval: float = 0.5
) -> tuple[Any, float]:
    started = time.monotonic()
    while True:
        value = probe()
        if value or time.monotonic() - started > timeout:
            return value, round(time.monotonic() - started, 1)
        time.sleep(interval)


def job_states(job_ids: list[str]) -> dict[str, str]:
    out = sh(
        ["squeue", "--noheader", "--states=all", "--format=%i %T", f"--jobs={','.join(job_ids)}"]
    ).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def job_dir(name: str) -> Path:
    path = SHARED / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    shutil.chown(path, JOB_USER, JOB_USER)
    return path


def write_as_user(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text)
    path.chmod(mode)
    shutil.chown(path, JOB_USER, JOB_USER)


def prepare_job_user() -> None:
    """The job user (made where it is missing, as the identity role would) and the shared
    job folder (a local one stands in for the share on this single node)."""
    try:
        pwd.getpwnam(JOB_USER)
    except KeyError:
        subprocess.run(["useradd", "--user-group", "--create-home", JOB_USER], check=True)
    SHARED.mkdir(parents=True, exist_ok=True)
    SHARED.chmod(0o1777)


# --- the validation job of validate.yml, with --gres=gpu:1 ------------------------------------
def validation_job(node: str) -> None:
    drill = "validation job (sbatch --gres=gpu:1)"
    run_dir = REPO / "build/node-check/validate"
    script = run_dir / "job.sh"
    own = run_dir / socket.gethostname()
    if own.exists():
        shutil.rmtree(run_dir / f"{own.name}.direct", ignore_errors=True)
        own.rename(run_dir / f"{own.name}.direct")  # node-check's direct run, kept
    started = time.monotonic()
    done = sh(
        [
            "sbatch",
            "--parsable",
            "--wait",
            "--gres=gpu:1",
            f"--nodelist={node}",
            f"--output={RUN}/validate-slurm-%j.out",
            f"--chdir={run_dir}",
            str(script),
        ]
    )
    figures["validation job s"] = round(time.monotonic() - started, 1)
    job_id = done.stdout.strip().split(";")[0]
    if not check(
        drill,
        "job completed",
        done.returncode == 0,
        f"job {job_id} rc {done.returncode} {done.stderr.strip()}",
    ):
        return
    result = json.loads((own / "node.json").read_text())
    summary = validation_summary(result, node, None, "gpu:1")
    (RUN / "validation-summary.json").write_text(json.dumps(summary, indent=2))
    failed = [c for c in summary["checks"] if not c["ok"]]
    check(
        drill,
        "every check passes",
        not failed,
        f"{summary['passed']}/{summary['total']} on {summary['device']} ({summary['backend']})"
        + (f"; failed: {failed}" if failed else ""),
    )
    check(drill, "Slurm gave a GPU", "gpu" in summary["gres"], f"gres {summary['gres']}")
    runs = [
        s.get("result") or {}
        for name, s in sorted(result["steps"].items())
        if name.startswith("run-")
    ]
    chosen = {run.get("device", {}).get("chosen_by", "") for run in runs}
    check(
        drill,
        "chosen_by names the Slurm GRES",
        all(c.startswith("slurm gres") for c in chosen),
        "; ".join(sorted(chosen)),
    )
    figures["validation"] = {
        k: summary[k]
        for k in ("device", "backend", "passed", "total", "gres", "ran_on", "saxpy_gbps")
    }
    figures["validation env"] = result["slurm"]["env"]


# --- gpulab submit -----------------------------------------------------------------------------
def submit(drill: str, name: str, flags: list[str]) -> dict[str, Any] | None:
    out = job_dir(name)
    graph = out / "graph.json"
    write_as_user(graph, GRAPH.read_text())
    done = sh(
        [
            GPULAB,
            "submit",
            str(graph),
            *flags,
            "--wait",
            "--output",
            str(out / "result.json"),
            "--gpulab",
            GPULAB,
            "--shared-dir",
            str(SHARED),
        ],
        user=JOB_USER,
    )
    if not check(
        drill, "exit 0", done.returncode == 0, f"rc {done.returncode}: {done.stderr.strip()[-300:]}"
    ):
        return None
    result: dict[str, Any] = json.loads((out / "result.json").read_text())
    return result


def submit_gpus(node: str) -> None:
    drill = "gpulab submit --gpus 1"
    result = submit(drill, "drill-submit-gpus", ["--gpus", "1"])
    if result is None:
        return
    device = result["device"]
    check(
        drill,
        "ran on the GPU",
        result["backend"] == "vulkan" and "NVIDIA" in device["name"],
        f"{result['backend']} on {device['name']}",
    )
    check(
        drill,
        "chosen_by names the Slurm GRES",
        device["chosen_by"].startswith("slurm gres"),
        device["chosen_by"],
    )


# --- a job without GPU ---------------------------------------------------------------------------
NO_GPU_JOB = """#!/bin/bash
cd "$1"
gpulab devices --json >devices.json 2>devices.err; echo $? >devices.rc
python3 -c 'import os
try:
    os.close(os.open("/dev/nvidia0", os.O_RDWR)); print("opened")
except OSError as e:
    print(e.errno, e.strerror)' >open.txt 2>&1
command -v nvidia-smi >/dev/null && nvidia-smi -L >smi.txt 2>&1
gpulab run graph.json --backend vulkan --output vulkan.json 2>vulkan.err; echo $? >vulkan.rc
gpulab run graph.json --backend auto --output auto.json 2>auto.err; echo $? >auto.rc
"""


def no_gpu_job(node: str) -> None:
    drill = "job without GPU"
    out = job_dir("drill-no-gpu")
    write_as_user(out / "graph.json", GRAPH.read_text())
    write_as_user(out / "job.sh", NO_GPU_JOB, 0o755)
    done = sh(
        [
            "sbatch",
            "--parsable",
            "--wait",
            f"--nodelist={node}",
            f"--output={out}/slurm.out",
            str(out / "job.sh"),
            str(out),
        ],
        user=JOB_USER,
    )
    if not check(
        drill, "job completed", done.returncode == 0, f"rc {done.returncode} {done.stderr.strip()}"
    ):
        return
    text = {p.name: p.read_text().strip() for p in out.iterdir() if p.is_file()}
    devices = json.loads(text.get("devices.json") or "[]")
    names = [d.get("name", "") for d in devices]
    check(
        drill,
        "Vulkan lists no NVIDIA device",
        not any("NVIDIA" in n for n in names),
        f"devices: {names or 'none'} (rc {text.get('devices.rc')})",
    )
    check(
        drill,
        "/dev/nvidia0 cannot be opened",
        text.get("open.txt", "").startswith("1 "),
        text.get("open.txt", ""),
    )
    figures["no-GPU job nvidia-smi -L"] = text.get("smi.txt", "(no nvidia-smi)")
    err = text.get("vulkan.err", "")
    check(
        drill,
        "--backend vulkan exits 3 with one line",
        text.get("vulkan.rc") == "3" and len(err.splitlines()) == 1,
        f"rc {text.get('vulkan.rc')}: {err}",
    )
    auto = json.loads(text.get("auto.json") or "{}")
    check(
        drill,
        "--backend auto runs on cpu and says why",
        text.get("auto.rc") == "0"
        and auto.get("backend") == "cpu"
        and "no GPU" in auto.get("backend_reason", ""),
        f"rc {text.get('auto.rc')}: {auto.get('backend')}: {auto.get('backend_reason')}",
    )


# --- shards ------------------------------------------------------------------------------------
SHARD_JOB = REPO / "scripts/gpu-host/shard-job.sh"


def shard_jobs(node: str) -> None:
    shards = int(
        next(
            w.split(":")[-1]
            for w in Path("/etc/slurm/nodes.conf").read_text().replace(" ", ",").split(",")
            if w.startswith("shard:")
        )
    )
    drill = f"{shards} jobs on the GPU's shards"
    out = job_dir("drill-shards")
    write_as_user(out / "graph.json", GRAPH.read_text())
    write_as_user(out / "job.sh", SHARD_JOB.read_text(), 0o755)
    started = time.monotonic()
    job_ids = []
    for _ in range(shards):
        done = sh(
            [
                "sbatch",
                "--parsable",
                "--gres=shard:1",
                f"--nodelist={node}",
                f"--output={out}/slurm-%j.out",
                str(out / "job.sh"),
                str(out),
                str(shards),
            ],
            user=JOB_USER,
        )
        job_ids.append(done.stdout.strip().split(";")[0])
    # A whole-GPU job asked for meanwhile: Slurm holds it while shards of the GPU are in use.
    whole = sh(
        [
            "sbatch",
            "--parsable",
            "--gres=gpu:1",
            f"--nodelist={node}",
            "--output=/dev/null",
            "--wrap=true",
        ],
        user=JOB_USER,
    )
    whole_id = whole.stdout.strip().split(";")[0]
    together = False
    states: dict[str, str] = {}
    while time.monotonic() - started < 240:
        states = job_states([*job_ids, whole_id])
        if not together and [states.get(j) for j in job_ids].count("RUNNING") == shards:
            together = True
            figures["shard jobs all RUNNING"] = dict(states)
            figures["gpu:1 job while the shards ran"] = (
                states.get(whole_id, "?")
                + " "
                + sh(["squeue", "--noheader", "--format=%r", f"--jobs={whole_id}"]).stdout.strip()
            )
        if all(states.get(j) in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"} for j in job_ids):
            break
        time.sleep(0.25)
    figures["shard jobs s"] = round(time.monotonic() - started, 1)
    check(drill, "all RUNNING at once", together, f"seen: {figures.get('shard jobs all RUNNING')}")
    check(drill, "all COMPLETED", all(states.get(j) == "COMPLETED" for j in job_ids), f"{states}")
    for job_id in job_ids:
        path = out / f"result-{job_id}.json"
        if not path.exists():
            check(
                drill,
                f"job {job_id} result",
                False,
                (out / f"slurm-{job_id}.out").read_text()[-300:],
            )
            continue
        result = json.loads(path.read_text())
        device = result["device"]
        env = (out / f"env-{job_id}").read_text().split()
        check(
            drill,
            f"job {job_id} computed on the shared GPU",
            result["backend"] == "vulkan"
            and "NVIDIA" in device["name"]
            and result["compare"]["ok"]
            and "shard" in device["chosen_by"],
            f"{result['backend']} on {device['name']}, compare ok {result['compare']['ok']}, "
            f"chosen_by {device['chosen_by']}; {' '.join(env)}",
        )
    sh(["scancel", whole_id])
    result = submit("gpulab submit --shards 1", "drill-submit-shards", ["--shards", "1"])
    if result is not None:
        check(
            "gpulab submit --shards 1",
            "chosen_by says the GPU is shared",
            "shard" in result["device"]["chosen_by"],
            f"{result['backend']} on {result['device']['name']}: {result['device']['chosen_by']}",
        )
    both = sh([GPULAB, "submit", str(GRAPH), "--shards", "1", "--gpus", "1"], user=JOB_USER)
    check(
        "gpulab submit --shards 1 --gpus 1",
        "exits 2 with one line",
        both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1,
        f"rc {both.returncode}: {both.stderr.strip()}",
    )


def _drained_by_the_check(node: str) -> tuple[str, str] | None:
    state, reason = node_state(node)
    return (state, reason) if "drain" in state and reason.startswith("gpulab-health:") else None


# --- the health check --------------------------------------------------------------------
def health_check(node: str) -> None:
    drill = "health check"
    conf = dict(
        line.split("=", 1)
        for line in Path("/etc/slurm/slurm.conf").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    interval = int(conf["HealthCheckInterval"])
    limit = 2 * interval + 5
    figures["HealthCheckInterval s"] = interval
    hidden = RUN / "hidden-icd"
    hidden.mkdir(exist_ok=True)
    moved = [
        (p, hidden / p.name)
        for d in ICD_DIRS
        if d.is_dir()
        for p in d.iterdir()
        if "nvidia" in p.name
    ]
    for source, target in moved:
        shutil.move(source, target)
    try:
        drained, took = wait_until(lambda: _drained_by_the_check(node), limit)
        state, reason = drained or node_state(node)
        check(
            drill,
            f"NVIDIA's ICD hidden: drained within two intervals ({limit} s)",
            drained is not None,
            f"after {took} s: {state} '{reason}'",
        )
        figures["drain s"] = took
    finally:
        for source, target in moved:
            shutil.move(target, source)
    state, took = wait_until(lambda: node_state(node)[0] == "idle", limit)
    check(
        drill,
        f"driver back: resumed within two intervals ({limit} s)",
        state,
        f"after {took} s: {node_state(node)}",
    )
    figures["resume s"] = took
    admin = "admin: maintenance window"
    sh(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={admin}"])
    time.sleep(limit)
    state, reason = node_state(node)
    check(
        drill,
        "an admin's drain stays",
        "drain" in state and reason == admin,
        f"after {limit} s: {state} '{reason}'",
    )
    sh(["scontrol", "update", f"nodename={node}", "state=resume"])


def write_report() -> int:
    """drills.json, and report.md: the host, how it differs from a systemd host, the Slurm
    files it runs from, and every check with the figures."""
    failed = [c for c in checks if not c["ok"]]
    gpu = sh(["nvidia-smi", "-L"]).stdout.strip()
    document = {
        "host": socket.gethostname(), "gpu": gpu, "checks": checks, "figures": figures,
        "passed": len(checks) - len(failed), "total": len(checks),
    }  # fmt: skip
    (RUN / "drills.json").write_text(json.dumps(document, indent=2) + "\n")
    lines = [
        f"# Real Slurm on {socket.gethostname()}: {gpu}",
        "",
        f"{sh(['slurmd', '-V']).stdout.strip()}; "
        f"{document['passed']}/{document['total']} checks passed.",
        "",
        "## How this host differs from a systemd host",
        "",
        (RUN / "differences.txt").read_text().strip(),
        "",
        "## The Slurm files it runs from",
        "",
        "Rendered by playbooks/node-check.yml and installed unchanged (compared byte for byte).",
    ]
    for name in ("slurm.conf", "plugins.conf", "nodes.conf", "gres.conf", "cgroup.conf"):
        path = Path("/etc/slurm") / name
        if path.exists():
            lines += ["", f"`/etc/slurm/{name}`:", "```", path.read_text().strip(), "```"]
    lines += ["", "## Checks", "", "| drill | check | ok | detail |", "|---|---|---|---|"]
    lines += [
        f"| {c['drill']} | {c['check']} | {'yes' if c['ok'] else '**no**'} | "
        f"{c['detail'].replace('|', '/')} |"
        for c in checks
    ]
    lines += ["", "## Figures", "", "```", json.dumps(figures, indent=2), "```", ""]
    (RUN / "report.md").write_text("\n".join(lines))
    print(f"==> [gpu-host] drills: {document['passed']}/{document['total']} checks passed on {gpu}")
    print(f"==> [gpu-host] report: {RUN / 'report.md'}")
    return 1 if failed else 0


def main() -> int:
    prepare_job_user()
    node = node_name()
    for drill in (validation_job, submit_gpus, no_gpu_job, shard_jobs, health_check):
        try:
            drill(node)
        except Exception as exc:
            check(drill.__name__, "ran", False, f"{type(exc).__name__}: {exc}")
    return write_report()


if __name__ == "__main__":
    sys.exit(main())
