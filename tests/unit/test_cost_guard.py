"""The cost guard of CI (`python scripts/bench cost --check`): its budgets file and its comparison.

The measuring itself runs under valgrind in .ci/run; here the tool compares figures given to it
(`--figures`, in the budgets' own format), as the command a developer runs.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUDGETS = REPO / "scripts" / "bench" / "budgets.toml"
SCENARIOS = ["send", "send_batch10", "receive_delete", "receive10_delete_batch", "send_subscribed", "send_signed",
             "publish_raw", "publish_envelope"]


def figures_file(folder: Path, name: str, values: dict[str, float], revision: str = "abc1234") -> Path:
    path = folder / name
    path.write_text("".join(f'{scenario} = {{ kinstructions = {value}, measured_on = "{revision}" }}\n'
                            for scenario, value in values.items()))
    return path


def check(budgets: Path, figures: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "bench"), "cost", "--check", "--budgets",
                           str(budgets), "--figures", str(figures)], capture_output=True, text=True, timeout=60)


def test_the_committed_budgets_name_every_scenario_once_with_a_figure_and_its_revision() -> None:
    lines = [line for line in BUDGETS.read_text().splitlines() if line and not line.startswith("#")]
    budgets = tomllib.loads(BUDGETS.read_text())
    assert sorted(budgets) == sorted(SCENARIOS)
    assert len(lines) == len(SCENARIOS)  # one line each: lowering a budget is a one-line change
    for scenario, entry in budgets.items():
        assert set(entry) == {"kinstructions", "measured_on"}, scenario
        assert isinstance(entry["kinstructions"], float) and entry["kinstructions"] > 0, scenario
        assert isinstance(entry["measured_on"], str) and entry["measured_on"], scenario


def test_figures_equal_to_the_committed_budgets_pass(tmp_path: Path) -> None:
    done = check(BUDGETS, BUDGETS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed: every scenario within 3% of its budget" in done.stdout


def test_a_scenario_more_than_3_percent_over_fails_with_the_table(tmp_path: Path) -> None:
    budgets = figures_file(tmp_path, "budgets.toml", dict.fromkeys(SCENARIOS, 1000.0))
    measured = figures_file(tmp_path, "measured.toml", {**dict.fromkeys(SCENARIOS, 1000.0), "send": 1031.0,
                                                        "send_signed": 990.0}, revision="def5678")
    done = check(budgets, measured)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "| scenario | budget | measured | ratio |" in done.stdout
    assert "| send | 1000.0 | 1031.0 | 1.031 **over** |" in done.stdout
    assert "| send_signed | 1000.0 | 990.0 | 0.990 |" in done.stdout
    assert "| send_batch10 | 1000.0 | 1000.0 | 1.000 |" in done.stdout
    assert "FAILED: send more than 3% over budget" in done.stdout


def test_a_scenario_exactly_3_percent_over_passes(tmp_path: Path) -> None:
    budgets = figures_file(tmp_path, "budgets.toml", dict.fromkeys(SCENARIOS, 1000.0))
    measured = figures_file(tmp_path, "measured.toml", {**dict.fromkeys(SCENARIOS, 1000.0), "send": 1030.0})
    done = check(budgets, measured)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| send | 1000.0 | 1030.0 | 1.030 |" in done.stdout


@pytest.mark.parametrize("text, problem", [
    ("".join(f'{s} = {{ kinstructions = 1.0, measured_on = "a" }}\n' for s in SCENARIOS[1:]), "no figure for send"),
    ("".join(f'{s} = {{ kinstructions = 1.0, measured_on = "a" }}\n' for s in SCENARIOS)
     + 'sendd = { kinstructions = 1.0, measured_on = "a" }\n', "unknown scenario 'sendd'"),
    ("".join(f'{s} = {{ kinstructions = "1", measured_on = "a" }}\n' for s in SCENARIOS),
     "send: kinstructions must be a positive number, not '1'"),
    ("".join(f'{s} = {{ kinstructions = 1.0 }}\n' for s in SCENARIOS), 'send: expected { kinstructions = NUMBER'),
    ("".join(f'{s} = {{ kinstructions = 1.0, measured_on = "" }}\n' for s in SCENARIOS),
     "send: measured_on must name a revision"),
    ("send = 1\n[", "budgets.toml: "),
])
def test_a_budgets_file_not_in_the_format_is_refused_with_what_is_wrong(tmp_path: Path, text: str,
                                                                        problem: str) -> None:
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(text)
    done = check(budgets, BUDGETS)
    assert done.returncode == 1
    assert problem in done.stderr, done.stderr
    assert "passed" not in done.stdout
