"""Drills an admin meets (issue 20), each with real `gpulab run` or `gpulab submit` jobs: the
shared storage full, a worker's clock off, munged stopped on a worker, the controller
container restarted whole, slurmdbd down, 50 submits at once over SSH, a worker's GPU check
failing, slurmctld paused while `gpulab submit` submits (round three). Each prints its time to
recovery and the job results lost (goal: none), starts from a cluster with every worker in
service and leaves one, also when it fails (finally blocks)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time

import pytest
from conftest import Record
from gpulab.submit.lookup import JobTag
from gpulab.submit.slurm_client import parse_tagged_jobs, sacct_tagged_argv, squeue_tagged_argv
from gpulab.submit.staging import safe_name
from lab_ops import FINAL_TIMEOUT, TERMINAL_STATES, Job, JobRun, Lab, wait_for
from submit_ops import GRAPH, SshSubmit, Submitted

# The seconds a drill's gpulab job waits before `gpulab run`: the fault strikes meanwhile.
JOB_WAIT_S = 40
ICD_GLOB = "/usr/share/vulkan/icd.d/lvp_icd.*.json"
ICD_HIDDEN = "/usr/share/vulkan/icd.d.gpulab-drill"
HEALTH_PROGRAM = "/usr/local/sbin/gpulab-healthcheck"


def _wait_state(lab: Lab, host: str, wanted: str, timeout: float) -> tuple[str, str]:
    """Waits until the worker's sinfo state matches `wanted` (a prefix, or 'in service')."""

    def probe() -> tuple[str, str] | None:
        state, reason = lab.worker_state(host)
        ok = lab.in_service(state) if wanted == "in service" else state.startswith(wanted)
        return (state, reason) if ok else None

    return wait_for(probe, timeout, interval=1) or lab.worker_state(host)


def _assert_finished_cleanly(run: JobRun, finals: dict[str, str]) -> None:
    for job in run.jobs:
        assert finals[job.job_id] in TERMINAL_STATES, f"job {job.job_id} is {finals[job.job_id]}"
        if finals[job.job_id] == "COMPLETED":
            assert run.result_complete(job), f"job {job.job_id} COMPLETED without its result"


def _submits_lost(submits: list[Submitted]) -> list[str]:
    return [
        f"submit exited {s.returncode} without the complete result: {s.last_line()[:160]}"
        for s in submits
        if not s.complete
    ]


# --- 1. the shared storage full ----------------------------------------------------------
FILL = ".gpulab-drill-fill"


def _free_bytes(lab: Lab) -> int:
    out = lab.on_controller(f"df --output=avail -B1 {lab.shared_dir} | tail -1")
    return int(out.strip())


def test_shared_storage_full_during_a_job(
    healthy_lab: Lab, ssh_submit: SshSubmit, record_fault: Record
) -> None:
    """The export fills while a gpulab job runs: the job fails with exit 4 and a reason and
    leaves no result (never a truncated one); `gpulab submit` meanwhile fails in one line;
    once space is freed the same submit returns the complete result."""
    lab = healthy_lab
    storage = lab.cluster.storage
    fill = f"{lab.shared_dir}/{FILL}"
    worker = lab.cluster.workers[0]
    run = JobRun(lab, "storage-full")
    # Its stderr on the worker's own disk: the full share could not take the reason.
    log = "/tmp/fault-storage-full-%j.out"
    job = run.submit(kind="gpulab", node=worker, steps=15, output=log)
    assert run.wait_running(job), f"job {job.job_id} did not start: {run.job_fields(job)}"
    try:
        # fallocate takes the free space at once; dd then takes whatever rounding left.
        lab.run(
            storage,
            f"fallocate -l $(df --output=avail -B1 {lab.shared_dir} | tail -1) {fill}.1; "
            f"dd if=/dev/zero of={fill}.2 bs=4k status=none; true",
        )
        assert _free_bytes(lab) < 4096, f"the share still has {_free_bytes(lab)} bytes free"
        full_submit = ssh_submit.wait()
        finals = run.wait_final(FINAL_TIMEOUT)
        job_log = lab.run(worker, f"cat {log.replace('%j', job.job_id)}", check=False).stdout
    finally:
        lab.run(storage, f"rm -f {fill}.1 {fill}.2")
    start = time.monotonic()
    after = ssh_submit.wait()
    recovered = time.monotonic() - start

    assert finals[job.job_id] != "COMPLETED" or run.result_complete(job), finals
    if finals[job.job_id] != "COMPLETED":
        assert "gpulab:" in job_log, f"job {job.job_id} {finals[job.job_id]} without a reason"
        listing = lab.on_controller(f"ls -a {run.directory}").split()
        leftovers = [name for name in listing if f"{job.job_id}.gpulab" in name]
        assert not leftovers, f"a failed job left {leftovers}"
    assert full_submit.returncode != 0, "gpulab submit succeeded on a full share"
    assert full_submit.stderr.strip(), "gpulab submit failed on a full share without a word"
    assert "Traceback" not in full_submit.stderr, full_submit.stderr
    lost = run.lost(finals) + _submits_lost([after])
    reason = (job_log.strip().splitlines() or ["(none)"])[-1]
    record_fault(
        "shared-storage-full",
        recovered,
        lost,
        f"job {job.job_id} {finals[job.job_id]} ({run.job_fields(job).get('ExitCode', '?')}): "
        f"{reason[:200]}; submit while full: exit {full_submit.returncode}, "
        f"{full_submit.last_line()[:200]}; after freeing: job {after.job_id} "
        f"{'complete' if after.complete else 'NOT complete'}",
    )
    assert not lost


# --- 2. a worker's clock 10 min off ------------------------------------------------------
def test_worker_clock_off(healthy_lab: Lab, record_fault: Record) -> None:
    """A container shares its host's kernel clock (no CAP_SYS_TIME; Linux time namespaces
    shift only the monotonic and boot clocks): a worker's clock cannot be set 10 min off
    here, and the drill proves that first. The nearest real thing is what munged does with a
    credential from such a clock: a worker 10 min behind encodes credentials that are already
    600 s old when they arrive, and munged refuses any credential older than its TTL
    (300 s by default) as expired. A credential with a 1 s TTL decoded 3 s later takes that
    same check in the real munged; a fresh one decodes again at once, and gpulab jobs on the
    worker run before and after."""
    lab = healthy_lab
    worker = lab.cluster.workers[0]
    controller = lab.cluster.controller
    set_clock = lab.run(worker, "date -s @$(( $(date +%s) + 600 ))", check=False)
    offset = float(lab.run(worker, "echo $(date +%s.%N)", check=False).stdout.strip() or 0) - float(
        lab.on_controller("date +%s.%N").strip()
    )
    assert set_clock.returncode != 0, "the worker set its clock: this drill assumes it cannot"
    assert abs(offset) < 5, f"the worker's clock is {offset:.1f} s off the controller's"

    run = JobRun(lab, "clock")
    before = run.submit(kind="gpulab", node=worker, steps=0)
    credential = lab.run(worker, "munge --no-input --ttl=1").stdout
    time.sleep(3)
    aged = lab.run(controller, "unmunge", stdin=credential, check=False)
    start = time.monotonic()
    fresh = lab.run(controller, "unmunge", stdin=lab.run(worker, "munge -n").stdout, check=False)
    recovered = time.monotonic() - start
    after = run.submit(kind="gpulab", node=worker, steps=0)
    finals, lost = run.settle()
    aged_status = next(
        (line for line in aged.stdout.splitlines() if line.startswith("STATUS:")), aged.stderr
    )
    record_fault(
        "worker-clock-off",
        recovered,
        lost,
        f"`date -s` on {lab.nodename(worker)}: {set_clock.stderr.strip()[:120]} "
        f"(clock {offset:+.2f} s off the controller's); a credential past its TTL: unmunge "
        f"exit {aged.returncode}, {aged_status.strip()[:80]}; a fresh one: exit "
        f"{fresh.returncode}; gpulab jobs {before.job_id}, {after.job_id}: "
        f"{finals[before.job_id]}, {finals[after.job_id]}",
    )
    assert aged.returncode != 0 and "Expired" in aged.stdout + aged.stderr, aged
    assert fresh.returncode == 0, fresh.stderr
    assert not lost
    assert set(finals.values()) == {"COMPLETED"}, finals


# --- 3. munged stopped on a worker -------------------------------------------------------
def test_munged_stopped_on_a_worker(healthy_lab: Lab, record_fault: Record) -> None:
    """`systemctl stop munge` on a worker (a stop: Restart=on-failure does not apply): its
    slurmd can decode nothing, the node goes down and its running job is requeued; gpulab
    jobs go to the other worker; the remedy, starting munge (what converging site.yml does
    too), brings the node back. Slurm may then drain it for a duplicate job id and hold the
    requeued job: the drill records that and the two commands that end it."""
    lab = healthy_lab
    worker, other = lab.cluster.workers[0], lab.cluster.workers[-1]
    run = JobRun(lab, "munge-stopped")
    running = run.submit(kind="gpulab", node=worker, steps=JOB_WAIT_S)
    assert run.wait_running(running), f"job {running.job_id}: {run.job_fields(running)}"
    start = time.monotonic()
    try:
        lab.run(worker, "systemctl stop munge")
        state, reason = _wait_state(lab, worker, "down", 150)
        detected = time.monotonic() - start
        assert state.startswith("down"), f"{worker} still {state} with munged stopped"
        # Jobs submitted while the worker is down: they run and finish on the other one.
        spare = JobRun(lab, "munge-stopped-elsewhere")
        elsewhere = [spare.submit(kind="gpulab", steps=0) for _ in range(2)]
        spare_finals = spare.wait_final(FINAL_TIMEOUT)
        nodes = {spare.job_fields(j).get("NodeList", "?") for j in elsewhere}
    finally:
        remedy = time.monotonic()
        lab.run(worker, "systemctl start munge")
    back, _ = _wait_state(lab, worker, "in service", 240)
    assert lab.in_service(back), f"{worker} is {back} after munge started again"
    remedies = _heal_duplicate_job(lab, run, running, worker)
    back, _ = _wait_state(lab, worker, "in service", 240)
    recovered = time.monotonic() - start
    after_remedy = time.monotonic() - remedy
    finals = run.wait_final(FINAL_TIMEOUT)
    lost = run.lost(finals) + spare.lost(spare_finals)
    record_fault(
        "munged-stopped",
        recovered,
        lost,
        f"{lab.nodename(worker)} {state} ({reason}) {detected:.1f} s after the stop; jobs "
        f"meanwhile ran on {sorted(nodes)}: {spare_finals}; in service "
        f"{after_remedy:.1f} s after "
        f"`systemctl start munge`; job {running.job_id} running at the stop: "
        f"{finals[running.job_id]} (restarts {run.job_fields(running).get('Restarts', '?')}); "
        f"admin steps: {'; '.join(remedies) or 'none'}",
    )
    assert nodes == {lab.nodename(other)}, nodes
    assert not lost
    assert set(spare_finals.values()) == {"COMPLETED"}, spare_finals
    _assert_finished_cleanly(run, finals)


def _heal_duplicate_job(lab: Lab, run: JobRun, job: Job, worker: str) -> list[str]:
    """Slurm requeued the job that ran at the stop, but its first run is still known to the
    worker's slurmd (its end could not be reported without munge): the second start meets
    "Duplicate jobid", which drains the node and holds the job ("launch failed requeued
    held"). The remedy, when that happens: resume the node, release the job. Returns the
    commands run."""

    def settled() -> str | None:
        fields = run.job_fields(job)
        state, reason = lab.worker_state(worker)
        if state.startswith("drain") or "held" in fields.get("Reason", ""):
            return f"{state} ({reason}), job {fields.get('Reason')}"
        return "ok" if fields.get("JobState") in ("RUNNING", *TERMINAL_STATES) else None

    seen = wait_for(settled, 180, 2)
    if seen in (None, "ok"):
        return []
    commands = [
        f"scontrol update nodename={lab.nodename(worker)} state=resume",
        f"scontrol release {job.job_id}",
    ]
    for command in commands:
        lab.on_controller(command, check=False)
    return [f"{seen}: {' && '.join(commands)}"]


# --- 4. the controller container restarted whole -----------------------------------------
CONTROLLER_UNITS = ("munge", "mariadb", "slurmdbd", "slurmctld")


def _started_order(lab: Lab) -> list[tuple[str, int]]:
    """The controller's daemons by the monotonic time their units became active."""
    stamps = []
    for unit in CONTROLLER_UNITS:
        out = lab.on_controller(
            f"systemctl show --property=ActiveEnterTimestampMonotonic --value {unit}",
            check=False,
        )
        stamps.append((unit, int(out.strip() or 0)))
    return sorted(stamps, key=lambda item: item[1])


def test_controller_container_restarted(healthy_lab: Lab, record_fault: Record) -> None:
    """The controller's container restarts (a reboot) with gpulab jobs running on each worker
    and more queued: munge, MariaDB, slurmdbd and slurmctld come back by themselves in that
    order (slurmctld after slurmdbd: the slurm role's gpulab-order.conf), the
    state save returns every job, and all complete with their results."""
    lab = healthy_lab
    run = JobRun(lab, "controller-restarted")
    running = [
        run.submit(kind="gpulab", node=w, steps=JOB_WAIT_S, exclusive=True)
        for w in lab.cluster.workers
    ]
    queued = [run.submit(kind="gpulab", steps=0, exclusive=True) for _ in lab.cluster.workers]
    assert all(run.wait_running(j) for j in running), {j.job_id: run.state(j) for j in running}
    before = {j.job_id: run.state(j) for j in run.jobs}

    start = time.monotonic()
    subprocess.run(
        ["podman", "restart", "--time", "10", lab.cluster.container(lab.cluster.controller)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    assert wait_for(lab.slurmctld_answers, 180, 2), "slurmctld does not answer after the restart"
    recovered = time.monotonic() - start
    after = {j.job_id: run.state(j) for j in run.jobs}
    order = _started_order(lab)
    active = lab.on_controller(f"systemctl is-active {' '.join(CONTROLLER_UNITS)}", check=False)

    finals, lost = run.settle()
    record_fault(
        "controller-restarted",
        recovered,
        lost,
        f"started in the order {' < '.join(u for u, _ in order)}; before {before}, after "
        f"the restart {after}, finally {finals}",
    )
    names = [u for u, _ in order]
    assert active.split() == ["active"] * len(CONTROLLER_UNITS), active
    assert names.index("munge") < names.index("slurmctld"), order
    assert names.index("mariadb") < names.index("slurmdbd"), order
    assert names.index("slurmdbd") < names.index("slurmctld"), order  # the role's drop-in
    assert all(after[j.job_id] in ("RUNNING", "COMPLETING", "COMPLETED") for j in running), after
    assert all(after[j.job_id] != "UNKNOWN" for j in queued), after
    assert not lost
    assert set(finals.values()) == {"COMPLETED"}, finals
    _assert_finished_cleanly(run, finals)


# --- 5. slurmdbd down with accounting on -------------------------------------------------
def _accounted(lab: Lab, job_ids: list[str]) -> dict[str, str]:
    out = lab.on_controller(
        "sacct --noheader --allocations --parsable2 --format=JobID,State "
        f"--jobs={','.join(job_ids)}",
        check=False,
    )
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def test_slurmdbd_down_with_accounting_on(healthy_lab: Lab, record_fault: Record) -> None:
    """slurmdbd stops: gpulab jobs still run and complete (slurmctld keeps their records and
    queues the accounting messages); when slurmdbd returns, sacct catches up with each."""
    lab = healthy_lab
    run = JobRun(lab, "slurmdbd-down")
    try:
        lab.on_controller("systemctl stop slurmdbd")
        jobs = [run.submit(kind="gpulab", steps=0) for _ in range(3)]
        finals = run.wait_final(FINAL_TIMEOUT)
        sacct_down = lab.run(
            lab.cluster.controller, f"sacct --noheader -j {jobs[0].job_id}", check=False
        )
    finally:
        start = time.monotonic()
        lab.on_controller("systemctl start slurmdbd")
    ids = [j.job_id for j in jobs]

    def caught_up() -> dict[str, str] | None:
        seen = _accounted(lab, ids)
        return seen if all(seen.get(i) == "COMPLETED" for i in ids) else None

    accounted = wait_for(caught_up, 300, 2) or _accounted(lab, ids)
    recovered = time.monotonic() - start
    lost = run.lost(finals)
    record_fault(
        "slurmdbd-down",
        recovered,
        lost,
        f"while down: jobs {finals}, sacct exit {sacct_down.returncode} "
        f"({(sacct_down.stderr.strip() or sacct_down.stdout.strip())[:120]}); "
        f"sacct after slurmdbd returned: {accounted}",
    )
    assert not lost
    assert set(finals.values()) == {"COMPLETED"}, finals
    _assert_finished_cleanly(run, finals)
    assert all(accounted.get(i) == "COMPLETED" for i in ids), accounted


# --- 6. 50 concurrent gpulab submit --wait through SSH -----------------------------------
CONCURRENT_SUBMITS = 50


def test_fifty_concurrent_submits_over_ssh(
    healthy_lab: Lab, ssh_submit: SshSubmit, record_fault: Record
) -> None:
    """50 `gpulab submit --wait` at once from this machine to the controller's sshd (Debian's
    MaxStartups 10:30:100 drops unauthenticated connections beyond 10): each dropped
    handshake is tried again, every one of the 50 returns the complete result."""
    lab = healthy_lab
    since = lab.on_controller("date '+%Y-%m-%d %H:%M:%S'").strip()
    start = time.monotonic()
    processes = [ssh_submit.start() for _ in range(CONCURRENT_SUBMITS)]
    submits = [ssh_submit.finish(p) for p in processes]
    elapsed = time.monotonic() - start
    drops = ssh_submit.sshd_drops_since(since)
    lost = _submits_lost(submits)
    job_ids = {s.job_id for s in submits if s.complete}
    record_fault(
        "fifty-submits-over-ssh",
        elapsed,
        lost,
        f"{sum(s.complete for s in submits)} of {CONCURRENT_SUBMITS} complete results "
        f"({len(job_ids)} distinct jobs) in {elapsed:.1f} s; sshd dropped {drops} handshakes "
        "past MaxStartups, each tried again by its client",
    )
    assert not lost
    assert len(job_ids) == CONCURRENT_SUBMITS


# --- 7. a worker's GPU check failing -----------------------------------------------------
def _health_check_missing(lab: Lab) -> str | None:
    worker = lab.cluster.workers[0]
    if lab.run(worker, f"test -x {HEALTH_PROGRAM}", check=False).returncode != 0:
        return f"no {HEALTH_PROGRAM} on {worker}: the slurm role here has no GPU health check"
    conf = lab.on_controller("scontrol show config", check=False)
    if "HealthCheckProgram" not in conf or HEALTH_PROGRAM not in conf:
        return "slurm.conf sets no HealthCheckProgram"
    return None


def test_worker_gpu_check_failing(healthy_lab: Lab, record_fault: Record) -> None:
    """The Vulkan ICD disappears from a worker: the health check drains it with a
    `gpulab-health:` reason, gpulab jobs run on the other worker, and once the ICD is back
    the check resumes the node by itself."""
    lab = healthy_lab
    missing = _health_check_missing(lab)
    if missing:
        pytest.skip(missing)
    worker, other = lab.cluster.workers[0], lab.cluster.workers[-1]
    run = JobRun(lab, "gpu-check")
    start = time.monotonic()
    try:
        lab.run(worker, f"mkdir -p {ICD_HIDDEN} && mv {ICD_GLOB} {ICD_HIDDEN}/")
        state, reason = _wait_state(lab, worker, "drain", 120)
        detected = time.monotonic() - start
        assert state.startswith("drain"), f"{worker} is {state} ({reason}) with no Vulkan ICD"
        assert reason.startswith("gpulab-health:"), reason
        jobs = [run.submit(kind="gpulab", steps=0) for _ in range(2)]
        finals = run.wait_final(FINAL_TIMEOUT)
        nodes = {run.job_fields(j).get("NodeList", "?") for j in jobs}
    finally:
        restored = time.monotonic()
        lab.run(worker, f"mv {ICD_HIDDEN}/*.json /usr/share/vulkan/icd.d/ && rmdir {ICD_HIDDEN}")
    back, back_reason = _wait_state(lab, worker, "in service", 120)
    recovered = time.monotonic() - start
    lost = run.lost(finals)
    record_fault(
        "worker-gpu-check-failing",
        recovered,
        lost,
        f"{lab.nodename(worker)} {state} ({reason}) {detected:.1f} s after the ICD went; "
        f"gpulab jobs ran on {sorted(nodes)}: {finals}; {back} "
        f"{time.monotonic() - restored:.1f} s after the ICD returned",
    )
    assert lab.in_service(back), f"{worker} is {back} ({back_reason}) after the ICD returned"
    assert nodes == {lab.nodename(other)}, nodes
    assert not lost
    assert set(finals.values()) == {"COMPLETED"}, finals
    _assert_finished_cleanly(run, finals)


# --- 8. slurmctld paused past sbatch's timeout while gpulab submit submits ---------------
# What gpulab's lines say when sbatch timed out and it looked the job up by its tag.
ANSWER_LOST = "sbatch's answer was lost"


def _message_timeout(lab: Lab) -> int:
    """slurm.conf's MessageTimeout: how long sbatch waits for slurmctld's answer (10 s default)."""
    config = lab.on_controller("scontrol show config")
    found = re.search(r"^MessageTimeout\s*=\s*(\d+)", config, re.MULTILINE)
    return int(found.group(1)) if found else 10


def _jobs_tagged(lab: Lab, tag: JobTag, argv: list[str]) -> list[str]:
    """The ids of the jobs that squeue or sacct (argv) lists with the submission's tag."""
    done = lab.run(lab.cluster.controller, shlex.join(argv), user=lab.job_user, check=False)
    if done.returncode != 0:
        return []
    return [job.job_id for job in parse_tagged_jobs(done.stdout) if tag.marks(job)]


def test_slurmctld_paused_while_submitting(
    healthy_lab: Lab, ssh_submit: SshSubmit, record_fault: Record
) -> None:
    """slurmctld stopped (SIGSTOP) for MessageTimeout + 10 s while `gpulab submit --wait`
    submits: sbatch times out, and slurmctld takes the job it was sent once it resumes (round
    three, item 5: gpulab said it failed, exit 3, and a user who tried again ran it twice).
    gpulab looks the job up by its tag, says sbatch's answer was lost, waits for that job and
    returns its complete result; the job ran exactly once."""
    lab = healthy_lab
    pause_s = _message_timeout(lab) + 10
    job_name = f"gpulab-{safe_name(json.loads(GRAPH.read_text())['name'])}"
    try:
        lab.on_controller("systemctl kill --kill-who=main --signal=STOP slurmctld")
        # --gpus 0, as the lab's partitions have no GPU GRES: no sinfo, which would wait on
        # the paused slurmctld and fail before anything is submitted.
        process = ssh_submit.start("--gpus", "0")
        time.sleep(pause_s)
    finally:
        resumed = time.monotonic()
        lab.on_controller("systemctl kill --kill-who=main --signal=CONT slurmctld")
    submitted = ssh_submit.finish(process)
    recovered = time.monotonic() - resumed

    tag = JobTag(job_name, submitted.job_dir or "?")
    queued = _jobs_tagged(lab, tag, squeue_tagged_argv(job_name))
    outputs = lab.on_controller(f"cd {shlex.quote(tag.job_dir)} && ls slurm-*.out", check=False)
    # slurmctld tells slurmdbd of a job a little later: for the record only.
    accounted = wait_for(lambda: _jobs_tagged(lab, tag, sacct_tagged_argv(job_name)), 60, 2)
    lost = _submits_lost([submitted])
    if len(queued) > 1:
        lost.append(f"the job ran {len(queued)} times: {queued}")
    found = [line for line in submitted.stderr.splitlines() if ANSWER_LOST in line]
    record_fault(
        "slurmctld-paused-during-submit",
        recovered,
        lost,
        f"slurmctld stopped {pause_s} s; gpulab: exit {submitted.returncode}, "
        f"{' / '.join(line[:160] for line in found) or 'no lost answer reported'}; "
        f"jobs tagged {tag.tag}: squeue {queued}, sacct {accounted}, outputs "
        f"{outputs.split()}",
    )
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.complete, submitted.stdout[:400]
    # The drill's point: sbatch did time out, and gpulab found the job rather than failing.
    assert found, f"sbatch's answer was not lost: the pause did not strike it\n{submitted.stderr}"
    assert f"found job {submitted.job_id} " in submitted.stderr, submitted.stderr
    assert queued == [submitted.job_id], queued
    assert outputs.split() == [f"slurm-{submitted.job_id}.out"], outputs
    assert not lost
