"""The monitoring role's alert rules (templates/gpulab.rules.yml.j2), rendered by Ansible's template
module with the role's defaults, pass `promtool check rules`, and each rule group passes its unit
tests (`promtool test rules`, roles/monitoring/tests/rules/GROUP.yml). promtool is Debian's, from
the prometheus package the role installs on the servers (scripts/setup.sh puts it in the venv).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles/monitoring"
RULE_TESTS = ROLE / "tests/rules"
RULES = "gpulab.rules.yml"


def promtool() -> str:
    found = shutil.which("promtool") or shutil.which(
        "promtool", path=str(Path(sys.executable).parent)
    )
    assert found, (
        "no promtool: run `make setup` (scripts/setup.sh takes it from Debian's prometheus package)"
    )
    return found


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rules as the role writes them with its defaults, beside a copy of the unit tests."""
    work = tmp_path_factory.mktemp("rules")
    argv = [
        str(Path(sys.executable).parent / "ansible"), "localhost", "--connection", "local",
        "--module-name", "ansible.builtin.template",
        "--args", f"src={ROLE}/templates/{RULES}.j2 dest={work}/{RULES} mode=0644",
        "--extra-vars", f"@{ROLE}/defaults/main.yml",
        "--extra-vars", f"@{ROLE}/vars/main.yml",
        "--extra-vars", f"@{ROLE}/vars/Debian.yml",
    ]  # fmt: skip
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    for test in RULE_TESTS.glob("*.yml"):
        shutil.copy(test, work / test.name)
    return work


def groups(rules: Path) -> dict[str, list[str]]:
    """Each rule group's name and its alerts."""
    data = yaml.safe_load(rules.read_text(encoding="utf-8"))
    return {g["name"]: [r["alert"] for r in g["rules"]] for g in data["groups"]}


def test_the_rules_pass_promtool_check(rendered: Path) -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", RULES],
        cwd=rendered,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_group_has_its_tests_and_every_alert_is_tested(rendered: Path) -> None:
    found = groups(rendered / RULES)
    assert sorted(p.stem for p in RULE_TESTS.glob("*.yml")) == sorted(found)
    for group, alerts in found.items():
        tests = yaml.safe_load((RULE_TESTS / f"{group}.yml").read_text(encoding="utf-8"))
        tested = {
            case["alertname"] for test in tests["tests"] for case in test.get("alert_rule_test", [])
        }
        assert tested == set(alerts), f"{group}: alerts without a test: {set(alerts) - tested}"
        # Each alert is tested firing, and not firing.
        for alert in alerts:
            cases = [
                case
                for test in tests["tests"]
                for case in test.get("alert_rule_test", [])
                if case["alertname"] == alert
            ]
            assert any(c["exp_alerts"] for c in cases), f"{alert} is never expected to fire"
            assert any(not c["exp_alerts"] for c in cases), (
                f"{alert} is never expected to stay quiet"
            )


@pytest.mark.parametrize("group", sorted(p.stem for p in RULE_TESTS.glob("*.yml")))
def test_the_group_passes_its_unit_tests(rendered: Path, group: str) -> None:
    done = subprocess.run(
        [promtool(), "test", "rules", f"{group}.yml"],
        cwd=rendered, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
