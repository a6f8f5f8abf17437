"""Debian 12 to Debian 13 under running and waiting jobs: each node's distribution upgrade with
Slurm and MariaDB held, then Slurm 22.05 -> 23.11 -> 24.11 and MariaDB 10.11 -> 11.8 with
`ansible-playbook gpulab.cluster.upgrade`. After each step: no job lost, `sacct` lists every
earlier job, a job queued before the first step still waits, a new job runs, every node back in
service. The steps build on each other and run in this order (molecule.yml: the stand-in)."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from slurm_fixtures import Record
from slurm_ops import Slurm, play_seconds, timed

from lab.cluster_under_test import wait_for

JOBS = 6  # one CPU each, more than the workers' CPUs: some run, the rest wait
JOB_SECONDS = 30
PREFERENCES = "/etc/apt/preferences.d/gpulab-held"
REPO_SOURCE = "/etc/apt/sources.list.d/gpulab-slurm-23.11.list"
REPO_LINE = "deb [trusted=yes] file:/var/lib/gpulab-slurm-23.11 ./"
# Held by version, whichever source has it (Debian 12's security updates too).
SLURM_HELD = "Package: slurm* libslurm*\nPin: version 22.05.*\nPin-Priority: 1001\n"
SLURM_2311 = "Package: slurm* libslurm*\nPin: version 23.11.*\nPin-Priority: 1001\n"
# slurmdbd 22.05 needs MariaDB 10.11 (docs/operations.md): Debian 12's until the last step.
MARIADB_HELD = "Package: mariadb* libmariadb*\nPin: version 1:10.11.*\nPin-Priority: 1001\n"
# Debian 12's own sources (the image's, from the machine that built it: lab/apt_sources.py),
# kept as bookworm.sources for the held packages once debian.sources points at Debian 13.
SOURCES = "/etc/apt/sources.list.d"
# A node's distribution upgrade, Slurm and MariaDB held (docs/operations.md, "Debian 12 to 13").
DIST_UPGRADE = f"""set -e
export DEBIAN_FRONTEND=noninteractive
printf '%s' '{SLURM_HELD}
{MARIADB_HELD}' > {PREFERENCES}
[ -e {SOURCES}/bookworm.sources ] || cp {SOURCES}/debian.sources {SOURCES}/bookworm.sources
sed -i 's/bookworm/trixie/g' {SOURCES}/debian.sources
apt-get update -qq
apt-get full-upgrade -y -qq -o Dpkg::Options::=--force-confold >/tmp/dist-upgrade.log 2>&1 ||
  {{ tail -20 /tmp/dist-upgrade.log >&2; exit 1; }}
"""


@dataclass(frozen=True)
class Step:
    """One run of the upgrade playbook: what apt may install, and what runs afterwards."""

    slurm: str
    mariadb: str
    preferences: str  # /etc/apt/preferences.d/gpulab-held on every host
    repository: bool = False  # Slurm 23.11's local repository in apt's sources

    @property
    def restarts(self) -> bool:
        return self.mariadb == "10.11"  # the MariaDB step leaves the Slurm daemons alone


STEPS = {
    "Slurm 23.11": Step("23.11", "10.11", f"{SLURM_2311}\n{MARIADB_HELD}", repository=True),
    "Slurm 24.11": Step("24.11", "10.11", MARIADB_HELD),
    "MariaDB 11.8": Step("24.11", "11.8", ""),
}
EARLIER: list[str] = []  # every job submitted so far: sacct must keep listing them


def _release(version: str) -> str:
    """The major release of a Slurm version: "23.11" for "23.11.4-1.2ubuntu5"."""
    return ".".join(version.strip().split(".")[:2])


def _releases(slurm: Slurm) -> dict[str, str]:
    """{host: the release of its installed Slurm}."""
    return {host: _release(v) for host, v in slurm.installed_versions().items()}


def _debian_releases(slurm: Slurm) -> dict[str, str]:
    return {h: slurm.run(h, "cat /etc/debian_version").strip() for h in slurm.cluster.hosts}


def _mariadb_version(slurm: Slurm) -> str:
    return slurm.on_controller("mysql -N -e 'select version()'")


def _unaccounted(slurm: Slurm) -> list[str]:
    """The jobs submitted so far that sacct does not list."""
    return sorted(set(EARLIER) - set(slurm.accounted(EARLIER)))


def _running_releases(slurm: Slurm) -> set[str]:
    """The releases of the running slurmctld and every registered slurmd."""
    controller = slurm.on_controller("scontrol show config | sed -n 's/^SLURM_VERSION *= *//p'")
    daemons = slurm.on_controller("sinfo --noheader --Node --format=%v").split()
    return {_release(v) for v in [controller, *daemons]}


def _with_running(queue: dict[str, str]) -> dict[str, str] | None:
    return queue if "RUNNING" in queue.values() else None


def _new_job_completes(slurm: Slurm) -> str:
    job = slurm.on_controller("sbatch --parsable --output=/dev/null --wrap=true").strip()
    EARLIER.append(job)
    return slurm.wait_jobs_final([job], timeout=120)[job]


@pytest.fixture(scope="module")
def waiting_job(slurm: Slurm) -> str:
    """A job queued to start in three hours: it must wait through every step."""
    assert slurm.wait_nodes_in_service(timeout=120), f"not in service: {slurm.node_states()}"
    job = slurm.on_controller(
        "sbatch --parsable --job-name=upgrade-waits --begin=now+3hours --output=/dev/null"
        " --wrap=true"
    ).strip()
    EARLIER.append(job)
    return job


def test_the_cluster_starts_on_debian_12_with_accounting(slurm: Slurm, waiting_job: str) -> None:
    releases = _debian_releases(slurm)
    assert all(r.startswith("12.") for r in releases.values()), releases
    assert set(_releases(slurm).values()) == {"22.05"}, _releases(slurm)
    assert _running_releases(slurm) == {"22.05"}
    assert _new_job_completes(slurm) == "COMPLETED"
    assert not _unaccounted(slurm), f"sacct lost {_unaccounted(slurm)}"


def _reboot(slurm: Slurm, host: str) -> None:
    """The container restarted, as a host reboots after its distribution upgrade."""
    restart = ["podman", "restart", slurm.cluster.container(host)]
    subprocess.run(restart, check=True, capture_output=True, timeout=120)
    booted = wait_for(
        lambda: (
            slurm.run(host, "systemctl is-system-running --wait", check=False).strip()
            in ("running", "degraded")
        ),
        timeout=120,
        interval=2,
    )
    assert booted, f"{host} did not boot: {slurm.run(host, 'systemctl --failed', check=False)}"


def _idle(slurm: Slurm, node: str) -> bool:
    return not slurm.on_controller(f"squeue --noheader --nodelist={node} --format=%i").strip()


def test_debian_12_to_13_node_by_node_with_slurm_held(
    slurm: Slurm, waiting_job: str, tmp_path: Path, record_step: Record
) -> None:
    """Controller first, then the storage host, then each worker drained: its distribution
    upgraded (Slurm and MariaDB held at Debian 12's), rebooted, converged again (site.yml
    --limit with the controller: the payload's venv is made anew for Debian 13's Python) and
    resumed."""
    cluster = slurm.cluster
    jobs = slurm.submit_sleep_jobs(JOBS, JOB_SECONDS, "dist-upgrade")
    EARLIER.extend(jobs)
    assert wait_for(lambda: _with_running(slurm.queue()), 60), "no job ran"
    order = [
        cluster.controller,
        *(h for h in cluster.hosts if h != cluster.controller and h not in cluster.workers),
        *cluster.workers,
    ]
    start, times = time.monotonic(), []
    for host in order:
        began = time.monotonic()
        node = cluster.node_name(host)
        if host in cluster.workers:
            slurm.on_controller(
                f"scontrol update nodename={node} state=drain reason='distribution upgrade'"
            )
            assert wait_for(partial(_idle, slurm, node), 300), f"{node} still runs jobs"
        slurm.run(host, DIST_UPGRADE, timeout=900)
        _reboot(slurm, host)
        # With the controller: a worker's node description may change with its distribution
        # (Mesa's device, its features), which only the controller's nodes.conf can announce.
        converge = slurm.converge(
            {}, tmp_path, limit=",".join(dict.fromkeys([host, cluster.controller]))
        )
        assert converge.returncode == 0, converge.stdout[-4000:] + converge.stderr[-2000:]
        if host in cluster.workers:
            slurm.on_controller(f"scontrol update nodename={node} state=resume")
        times.append(f"{node} {timed(began):.0f} s")
    seconds = timed(start)

    finals = slurm.wait_jobs_final(jobs, timeout=300)
    lost = [job for job, state in finals.items() if state != "COMPLETED"]
    releases = _debian_releases(slurm)
    assert all(r.startswith("13.") for r in releases.values()), releases
    assert set(_releases(slurm).values()) == {"22.05"}, _releases(slurm)
    assert _mariadb_version(slurm).startswith("10.11.")
    assert slurm.wait_nodes_in_service(timeout=120), f"not in service: {slurm.node_states()}"
    assert slurm.queue().get(waiting_job) == "PENDING", slurm.queue()
    assert _new_job_completes(slurm) == "COMPLETED"
    assert not lost, finals
    assert not (missing := _unaccounted(slurm)), f"sacct lost {missing}"
    record_step("Debian 12 -> 13, Slurm held", seconds, len(lost), "; ".join(times))


@pytest.mark.parametrize("name", list(STEPS))
def test_upgrade_step(
    slurm: Slurm, waiting_job: str, name: str, tmp_path: Path, record_step: Record
) -> None:
    """This step's package sources on every host, then the upgrade playbook while jobs run and
    wait; afterwards every host and daemon at this step's releases, nothing lost, and the
    daemons restarted once each in Slurm's order (or, for MariaDB, not at all)."""
    step = STEPS[name]
    for host in slurm.cluster.hosts:
        pin = f"printf '%s' '{step.preferences}' > {PREFERENCES}"
        slurm.run(host, pin if step.preferences else f"rm -f {PREFERENCES}")
        slurm.run(
            host,
            f"echo '{REPO_LINE}' > {REPO_SOURCE}" if step.repository else f"rm -f {REPO_SOURCE}",
        )
    jobs = slurm.submit_sleep_jobs(JOBS, JOB_SECONDS, f"upgrade-{step.slurm}")
    EARLIER.extend(jobs)
    queue = wait_for(lambda: _with_running(slurm.queue()), 60)
    daemons = slurm.daemons()
    start = time.monotonic()
    upgrade = slurm.converge(
        {"slurm_upgrade_backup": f"/var/backups/slurm_acct_db-before-{name.replace(' ', '-')}.sql"},
        tmp_path,
        playbook="gpulab.cluster.upgrade",
    )
    seconds = timed(start)
    assert upgrade.returncode == 0, upgrade.stdout[-4000:] + upgrade.stderr[-2000:]
    assert queue, "no job ran when the upgrade began"

    finals = slurm.wait_jobs_final(jobs, timeout=300)
    lost = [job for job, state in finals.items() if state != "COMPLETED"]
    assert set(_releases(slurm).values()) == {step.slurm}, _releases(slurm)
    assert slurm.wait_nodes_in_service(timeout=120), f"not in service: {slurm.node_states()}"
    assert _running_releases(slurm) == {step.slurm}
    assert _mariadb_version(slurm).startswith(step.mariadb + ".")
    after = slurm.daemons()
    if step.restarts:
        assert not set(daemons.items()) & set(after.items()), f"not restarted: {after}"
        dbd, ctld = (
            int(after[f"{slurm.cluster.controller} {d}"].split()[1])
            for d in ("slurmdbd", "slurmctld")
        )
        assert dbd < ctld, f"slurmctld restarted before slurmdbd: {after}"
    else:
        assert after == daemons, "a Slurm daemon restarted"
    assert slurm.queue().get(waiting_job) == "PENDING", slurm.queue()
    assert _new_job_completes(slurm) == "COMPLETED"
    assert not lost, finals
    assert not (missing := _unaccounted(slurm)), f"sacct lost {missing}"
    conversions = slurm.on_controller(
        "grep -c 'Conversion done: success' /var/log/slurm/slurmdbd.log", check=False
    )
    stages = "; ".join(f"{play} {secs:.0f} s" for play, secs in play_seconds(upgrade.stdout))
    print(f"  slurmdbd database conversions so far: {conversions.strip()}")
    record_step(f"upgrade to {name}", seconds, len(lost), stages)


def test_the_queued_job_is_kept_to_the_end(slurm: Slurm, waiting_job: str) -> None:
    """Cancelled now, it is recorded like every other job."""
    slurm.on_controller(f"scancel {waiting_job}")
    assert slurm.wait_jobs_final([waiting_job], timeout=60)[waiting_job].startswith("CANCELLED")
    assert not (missing := _unaccounted(slurm)), f"sacct lost {missing}"
