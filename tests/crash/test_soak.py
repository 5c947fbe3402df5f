"""Soak runs: the durability checks of this tier, for much longer. Opt-in (`-m soak`), never in the default run.

    .venv/bin/python -m pytest -m soak tests/crash -s --soak-kills 200 --soak-losses 10

- hundreds of SIGKILLs under the crash workload (test_crash_recovery's run, `--soak-kills` of them,
  `--soak-seconds-between` apart on average): nothing acknowledged lost, nothing deleted back, no
  receive count going down, the file's integrity check and `queueserver check` ok;
- many losses of the machine with a folder replica (test_machine_loss's run, `--soak-losses` of
  them): each keeps the promise, and the loss window measured over all of them (the oldest
  acknowledgment that did not come back) is printed: the figure of the benchmark report.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from support.crash_workload import crash_run
from support.faults import assert_acknowledged_work_survived
from support.machine_loss import loss_run
from support.server import run_queueserver

pytestmark = [pytest.mark.soak, pytest.mark.server_process]

LOSS_LOAD_SECONDS = 8.0


def test_hundreds_of_sigkills_under_load_lose_nothing_acknowledged(tmp_path: Path,
                                                                   pytestconfig: pytest.Config) -> None:
    kills = pytestconfig.getoption("soak_kills")
    mean = pytestconfig.getoption("soak_seconds_between")
    figures = crash_run(tmp_path, kills=kills, seconds_between=(0.5 * mean, 1.5 * mean),
                        log=lambda line: print(line, flush=True), seed=pytestconfig.getoption("soak_seed"))
    print(figures.report())
    assert figures.kills == kills + 1, figures.report()
    assert_acknowledged_work_survived(figures)
    check = run_queueserver("check", "--db", str(tmp_path / "crash.db"))
    assert check.returncode == 0 and "integrity: ok" in check.stdout, check.stdout + check.stderr


def test_many_losses_of_the_machine_keep_the_promise_and_measure_the_loss_window(
        tmp_path: Path, pytestconfig: pytest.Config) -> None:
    windows = []
    for run in range(pytestconfig.getoption("soak_losses")):
        folder = tmp_path / f"loss-{run}"
        folder.mkdir()
        figures = loss_run(folder, ["--replicate", str(folder / "replica")], LOSS_LOAD_SECONDS, seed=run)
        print(figures.report(), flush=True)
        assert figures.ok, figures.report()
        windows.append(figures.loss_window_seconds)
    print(f"loss window over {len(windows)} losses: min {min(windows):.2f} s, median "
          f"{statistics.median(windows):.2f} s, max {max(windows):.2f} s")
