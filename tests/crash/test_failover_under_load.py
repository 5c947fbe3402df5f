"""Failover under mixed load, measured: the primary SIGKILLed with its Litestream, the standby promoted,
the workers moved to it, a new standby following the new generation; again. support/failover.py does
the counting: nothing acknowledged before the replication window is lost, no message deleted outside
the kills' windows comes back, receipt handles of the old primary are honoured or stale exactly as
after a restart that lost the window, and the RTO (kill to first acknowledged send) is printed.

    .venv/bin/python -m pytest -q -s tests/crash/test_failover_under_load.py
    .venv/bin/python -m pytest -q -s -m soak tests/crash/test_failover_under_load.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.failover import failover_run

RTO_LIMIT_SECONDS = 15.0  # loose: the figure itself is printed and stated in docs/operations.md


def _check(figures: object, kills: int) -> None:
    print(figures.report())  # type: ignore[attr-defined]
    assert figures.ok, figures.report()  # type: ignore[attr-defined]
    assert len(figures.rto_seconds) == kills, figures.report()  # type: ignore[attr-defined]
    assert max(figures.rto_seconds) < RTO_LIMIT_SECONDS, figures.report()  # type: ignore[attr-defined]
    assert figures.acked_sends > 200 * kills and figures.acked_deletes > 50, figures.report()  # type: ignore[attr-defined]


def test_two_failovers_under_load_lose_nothing_before_the_window_and_bring_back_no_deleted_message(
        tmp_path: Path) -> None:
    _check(failover_run(tmp_path, kills=2), 2)


@pytest.mark.soak
def test_many_failovers_under_load_lose_nothing_before_the_window(tmp_path: Path) -> None:
    _check(failover_run(tmp_path, kills=8), 8)
