"""gpulab.cluster.slurm_version_refusals: SchedMD's compatibility window, release by release."""

from __future__ import annotations

import pytest
from ansible_collections.gpulab.cluster.plugins.filter.slurm_versions import (
    FilterModule,
    slurm_release,
    slurm_version_refusals,
)

# The packaged versions of the supported distributions.
DEBIAN12 = "22.05.8-4+deb12u3"
DEBIAN13 = "24.11.5-1"
UBUNTU2204 = "21.08.5-2ubuntu1"
UBUNTU2404 = "23.11.4-1.2ubuntu5"


@pytest.mark.parametrize(
    ("version", "release"),
    [
        (DEBIAN12, "22.05"),
        (UBUNTU2204, "21.08"),
        ("1:23.02.7-1", "23.02"),  # an epoch
        ("slurm 24.11.5", "24.11"),  # sinfo -V
        ("", ""),
        ("(none)", ""),
    ],
)
def test_release_of_a_package_version(version: str, release: str) -> None:
    assert slurm_release(version) == release


def refused(controller: str, worker: str) -> list[str]:
    return slurm_version_refusals({"ctl": controller, "w1": worker}, "ctl")


@pytest.mark.parametrize(
    ("controller", "worker"),
    [
        (DEBIAN12, DEBIAN12),
        (DEBIAN12, UBUNTU2204),  # a Jetson under a Raspberry Pi: one release older
        ("22.05.1", "20.11.9"),  # two older: the edge of the old window
        (DEBIAN13, UBUNTU2404),
        (DEBIAN13, "24.05.1"),
        (DEBIAN13, "23.02.7"),  # three older: 24.11 widened the window
        ("25.11.0", "24.05.4"),
        ("26.05.0", "25.05.1"),  # after the known list, the May/November cadence
    ],
)
def test_pairs_that_work(controller: str, worker: str) -> None:
    assert refused(controller, worker) == []


def test_a_worker_newer_than_the_controller_is_refused() -> None:
    (message,) = refused(DEBIAN12, DEBIAN13)
    assert message.startswith("slurm: w1 would run Slurm 24.11 (24.11.5-1), newer than 22.05")
    assert "controller ctl" in message


def test_a_worker_three_releases_behind_an_old_controller_is_refused() -> None:
    (message,) = refused("23.02.7", "20.11.9")
    assert "too old for 23.02 on the controller ctl, which accepts 23.02, 22.05, 21.08" in message


def test_a_worker_four_releases_behind_a_new_controller_is_refused() -> None:
    (message,) = refused(DEBIAN13, DEBIAN12)
    assert "Slurm 22.05" in message
    assert "which accepts 24.11, 24.05, 23.11, 23.02" in message


def test_ubuntu_2204_under_debian_13_is_refused() -> None:
    assert refused(DEBIAN13, UBUNTU2204)


def test_the_window_names_releases_past_the_known_list() -> None:
    (message,) = refused("26.11.0", "24.11.0")
    assert "accepts 26.11, 26.05, 25.11, 25.05;" in message


def test_a_host_without_a_package_is_named() -> None:
    (message,) = refused(DEBIAN12, "")
    assert message.startswith("slurm: w1 would run Slurm none (no package)")


def test_a_controller_without_a_package_is_the_one_refusal() -> None:
    (message,) = slurm_version_refusals({"ctl": "", "w1": DEBIAN12, "w2": DEBIAN13}, "ctl")
    assert "the controller ctl has no Slurm package" in message


def test_every_refused_host_gets_its_line() -> None:
    versions = {"ctl": DEBIAN12, "w1": DEBIAN13, "w2": UBUNTU2204, "w3": "17.11.2"}
    refusals = slurm_version_refusals(versions, "ctl")
    assert [line.split()[1] for line in refusals] == ["w1", "w3"]


def test_the_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {"slurm_release", "slurm_version_refusals"}


def upgrade_refusals(installed: str, candidate: str) -> list[str]:
    """The lines for a cluster of one host that would go from `installed` to `candidate`."""
    return slurm_version_refusals({"ctl": candidate}, "ctl", {"ctl": installed})


def test_debian_12_to_13_skips_three_releases_and_is_refused() -> None:
    assert upgrade_refusals(DEBIAN12, "24.11.5-4+deb13u1") == [
        "slurm: ctl would go from Slurm 22.05 (22.05.8-4+deb12u3) to 24.11 (24.11.5-4+deb13u1),"
        " skipping 23.02, 23.11, 24.05; 24.11 reads the state and accounting of 24.05, 23.11, 23.02"
        " only: upgrade to 23.11 first (docs/operations.md)"
    ]


@pytest.mark.parametrize(
    ("installed", "candidate"),
    [
        (DEBIAN12, DEBIAN12),  # no upgrade
        (DEBIAN12, "22.05.11-1"),  # a point release
        (DEBIAN12, "23.02.7-1"),
        (DEBIAN12, UBUNTU2404),  # 22.05 -> 23.11: two releases, the old window's edge
        (UBUNTU2404, DEBIAN13),  # 23.11 -> 24.11
        ("23.02.7-1", DEBIAN13),  # three releases: 24.11's wider window
    ],
)
def test_upgrades_within_the_window(installed: str, candidate: str) -> None:
    assert upgrade_refusals(installed, candidate) == []


def test_22_05_to_24_05_is_refused_through_23_11() -> None:
    (message,) = upgrade_refusals(DEBIAN12, "24.05.4-1")
    assert message.endswith(
        "skipping 23.02, 23.11; 24.05 reads the state and accounting of 23.11, 23.02 only:"
        " upgrade to 23.11 first (docs/operations.md)"
    )


def test_a_downgrade_is_refused() -> None:
    (message,) = upgrade_refusals(DEBIAN13, DEBIAN12)
    assert message.startswith("slurm: ctl would go from Slurm 24.11 (24.11.5-1) to 22.05")
    assert "a downgrade" in message


def test_hosts_without_slurm_installed_are_no_upgrade() -> None:
    versions = {"ctl": DEBIAN13, "w1": DEBIAN13}
    assert slurm_version_refusals(versions, "ctl", {"ctl": "", "w1": ""}) == []


def test_each_host_upgrading_too_far_gets_its_line_before_the_cluster_lines() -> None:
    versions = {"ctl": DEBIAN13, "w1": DEBIAN13, "w2": DEBIAN12}
    installed = {"ctl": DEBIAN12, "w1": DEBIAN12, "w2": DEBIAN12}
    lines = slurm_version_refusals(versions, "ctl", installed)
    assert [line.split(" would ")[0] for line in lines] == ["slurm: ctl", "slurm: w1", "slurm: w2"]
    assert "too old for 24.11" in lines[2]
