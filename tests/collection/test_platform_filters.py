"""gpulab.cluster.platform_refusal / platform_vars_files: the supported distributions, once."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpulab.cluster.plugins.filter.platforms import (
    FilterModule,
    platform_refusal,
    platform_vars_files,
)


def facts(distribution: str, version: str, major: str, family: str = "Debian") -> dict[str, Any]:
    """The fact keys the filters read, as Ansible reports them for that distribution."""
    return {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_major_version": major,
        "os_family": family,
    }


SUPPORTED = [
    facts("Debian", "12.11", "12"),
    facts("Debian", "13.1", "13"),
    facts("Raspbian", "12", "12"),  # Raspberry Pi OS images that still say so
    facts("Ubuntu", "22.04", "22"),  # also L4T r36 (JetPack 6)
    facts("Ubuntu", "24.04", "24"),
]
REFUSED = [
    (facts("CentOS", "9", "9", "RedHat"), "gpulab: worker3 runs CentOS 9; supported: "),
    (facts("Debian", "11.9", "11"), "gpulab: worker3 runs Debian 11.9; "),
    (facts("Ubuntu", "22.10", "22"), "gpulab: worker3 runs Ubuntu 22.10; "),  # same major, not LTS
    (facts("Ubuntu", "20.04", "20"), "gpulab: worker3 runs Ubuntu 20.04; "),
    (facts("Raspbian", "11", "11"), "gpulab: worker3 runs Raspbian 11; "),
]


@pytest.mark.parametrize("host_facts", SUPPORTED, ids=lambda f: str(f["distribution_version"]))
def test_supported_distributions_pass(host_facts: dict[str, Any]) -> None:
    assert platform_refusal(host_facts, "worker3") == ""


@pytest.mark.parametrize(("host_facts", "start"), REFUSED, ids=[f[1] for f in REFUSED])
def test_a_refusal_is_one_line_naming_host_distribution_and_the_supported(
    host_facts: dict[str, Any], start: str
) -> None:
    message = platform_refusal(host_facts, "worker3")
    assert message.startswith(start)
    assert message.endswith("supported: Debian 12, 13, Raspberry Pi OS 12, Ubuntu 22.04, 24.04")
    assert "\n" not in message


def test_missing_facts_are_refused_not_raised() -> None:
    assert platform_refusal({}, "worker3").startswith(
        "gpulab: worker3 runs an unknown distribution;"
    )


def test_vars_files_go_from_release_to_family() -> None:
    assert platform_vars_files(facts("Ubuntu", "22.04", "22")) == [
        "Ubuntu-22.yml",
        "Ubuntu.yml",
        "Debian.yml",
    ]
    assert platform_vars_files(facts("Raspbian", "12", "12")) == [
        "Raspbian-12.yml",
        "Raspbian.yml",
        "Debian.yml",
    ]


def test_the_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {"platform_refusal", "platform_vars_files"}
