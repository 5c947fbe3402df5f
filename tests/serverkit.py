"""The server process and a bounded wait, for the worker and Spark tests (on tests/serverproc.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from serverproc import REPO_ROOT, Server, ServerError, start_server

__all__ = ["REPO_ROOT", "Server", "start", "wait_for"]

READY_TIMEOUT_S = 20.0


def start(db: Path, *extra: str) -> Server:
    """A queueserver on a free loopback port; stop() it when done."""
    try:
        return start_server(db, *extra, ready_timeout=READY_TIMEOUT_S)
    except ServerError as exc:
        pytest.fail(str(exc))


def wait_for(predicate: Callable[[], Any], what: str, timeout: float, interval: float = 0.01) -> Any:
    """Poll until `predicate()` is truthy; fail (never hang) if it is not within `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval)
