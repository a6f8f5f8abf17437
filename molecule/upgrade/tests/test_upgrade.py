"""Debian 12's Slurm 22.05 asked to become Debian 13's 24.11 under running and queued jobs: the
accounting database backed up first, then the upgrade refused before any change, in one line
per host. The steps build on each other and run in this order. The upgrade that Slurm allows,
through 23.11, is molecule/upgrade-path's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from slurm_fixtures import Record
from slurm_ops import Slurm, StateSampler, timed

JOBS = 8
BACKUP = "/var/backups/slurm_acct_db.sql"
# Debian 13's packages beside Debian 12's: apt's candidate for Slurm becomes 24.11. From the
# node's own Debian archive (its sources' first stanza, which the image took from the machine
# that built it: lab/apt_sources.py), with suite trixie.
TRIXIE_SOURCES = "/etc/apt/sources.list.d/gpulab-upgrade-trixie.sources"
ADD_TRIXIE = (
    "sed -n '1,/^$/p' /etc/apt/sources.list.d/debian.sources"
    f" | sed 's/^Suites:.*/Suites: trixie/' > {TRIXIE_SOURCES}"
)


@pytest.fixture(scope="module")
def jobs(slurm: Slurm) -> list[str]:
    """Jobs running and waiting during the whole upgrade attempt (released at its end)."""
    assert slurm.wait_nodes_in_service(timeout=120), f"not in service: {slurm.node_states()}"
    slurm.hold()
    return slurm.submit_held_jobs(JOBS, "upgrade")


def test_the_accounting_database_is_backed_up_first(
    slurm: Slurm, jobs: list[str], record_step: Record
) -> None:
    """Stage 1 of the procedure: mysqldump of slurmdbd's database while the jobs run."""
    start = time.monotonic()
    database = slurm.cluster.var("slurm_dbd_db_name", "slurm_acct_db")
    slurm.on_controller(
        f"mkdir -p /var/backups && mysqldump --single-transaction {database} > {BACKUP}"
    )
    seconds = timed(start)
    tables = slurm.on_controller(f"grep -c '^CREATE TABLE' {BACKUP}")
    cluster = slurm.cluster.var("slurm_cluster_name", "gpulab")
    assert f"CREATE TABLE `{cluster}_job_table`" in slurm.on_controller(
        f"grep '^CREATE TABLE' {BACKUP}"
    )
    record_step("slurmdbd database backup", seconds, 0, f"{tables.strip()} tables in {BACKUP}")


def test_22_05_to_24_11_is_refused_before_any_change(
    slurm: Slurm, jobs: list[str], tmp_path: Path, record_step: Record
) -> None:
    """Debian 13's package source on every node, site.yml with slurm_package_state=latest:
    one refusal line per host, nothing installed, no daemon restarted, no job lost."""
    versions, daemons = slurm.installed_versions(), slurm.daemons()
    assert {v.split(".")[:2] == ["22", "05"] for v in versions.values()} == {True}, versions
    for host in slurm.cluster.hosts:
        slurm.run(host, ADD_TRIXIE)
    try:
        with StateSampler(slurm) as sampler:
            start = time.monotonic()
            converge = slurm.converge({"slurm_package_state": "latest"}, tmp_path)
            seconds = timed(start)
            queue = slurm.queue()
            slurm.release()
            finals = slurm.wait_jobs_final(jobs, timeout=300)
    finally:
        for host in slurm.cluster.hosts:
            slurm.run(host, f"rm -f {TRIXIE_SOURCES} && apt-get update -qq", timeout=300)
    assert len(queue) == JOBS and set(queue.values()) == {"PENDING", "RUNNING"}, queue
    assert converge.returncode != 0, "the upgrade to 24.11 was not refused"
    # The failed assert's message: on stderr where display_failed_stderr is set (molecule's).
    refusals = [
        line.strip()
        for line in (converge.stdout + converge.stderr).splitlines()
        if "would go from Slurm 22.05" in line
    ]
    assert refusals, converge.stdout[-3000:] + converge.stderr[-3000:]
    for host in slurm.cluster.hosts:
        assert any(
            f"slurm: {host} would go from Slurm 22.05 ({versions[host]}) to 24.11" in line
            and "skipping 23.02, 23.11, 24.05" in line
            for line in refusals
        ), (host, refusals)
    assert slurm.installed_versions() == versions, "a package changed"
    assert slurm.daemons() == daemons, "a daemon restarted"
    lost = [job for job, state in finals.items() if state != "COMPLETED"]
    assert not lost, finals
    assert not sampler.bad(), sampler.bad()
    assert set(slurm.accounted(jobs)) >= set(jobs), "sacct lost a job"
    print(f"\nthe refusal: {refusals[0]}")
    record_step("upgrade 22.05 -> 24.11 refused", seconds, len(lost))
