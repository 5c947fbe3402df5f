"""The server process for every tier: scripts/benchkit.py's launcher, with pytest's way of failing.

A start that does not reach READY fails the test (never a bare exception from a fixture);
`ServerProcess.stop()` insists on a clean exit; `Servers` kills whatever a test started.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchkit import (
    ACCOUNT,
    REPO_ROOT,
    ClockControl,
    Refusal,
    Server,
    ServerError,
    advance_clock,
    integrity,
    run_queueserver,
    running,
    sh,
    try_serve,
)

__all__ = ["ACCOUNT", "REPO_ROOT", "ClockControl", "Refusal", "Server", "ServerError", "ServerProcess", "Servers",
           "advance_clock", "integrity", "run_queueserver", "running", "sh", "start", "start_server",
           "try_serve", "wait_for"]

STOP_TIMEOUT_S = 15.0
READY_TIMEOUT_S = 20.0


class ServerProcess(Server):
    """A queueserver child process whose stop() insists on a clean exit (rc 0)."""

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        try:
            rc = super().stop(timeout)
        except ServerError as exc:
            pytest.fail(str(exc))
        assert rc == 0, f"queueserver exited with {rc} after SIGTERM\n--- stderr ---\n{self.stderr_text()}"
        return rc


def start_server(db_path: str | os.PathLike[str], *extra_args: str, **options: Any) -> ServerProcess:
    """Start queueserver on a free port and wait for its READY line; a start that fails fails the test."""
    import benchkit

    try:
        server = benchkit.start_server(db_path, *extra_args, server_class=ServerProcess, **options)
    except ServerError as exc:
        pytest.fail(str(exc))
    assert isinstance(server, ServerProcess)
    return server


def start(db: Path, *extra: str) -> Server:
    """A queueserver on a free loopback port with a longer READY wait (worker and Spark tiers); stop() it."""
    return start_server(db, *extra, ready_timeout=READY_TIMEOUT_S)


class Servers:
    """Starts queueserver processes and kills whatever is still running at teardown.

    Their stderr logs go to `log_dir` when given (the crash tier keeps them on the ordinary
    disk, so that a log line about a full or read-only filesystem is not lost on that very
    filesystem); beside the database otherwise. `strict` servers are `ServerProcess`es whose
    failed start fails the test; the others raise ServerError and may exit as they will.
    """

    def __init__(self, log_dir: Path | None = None, *, strict: bool = False) -> None:
        self.started: list[Server] = []
        self.log_dir = log_dir
        self.strict = strict

    def start(self, db_path: str | os.PathLike[str], *extra_args: str) -> Server:
        import benchkit

        launch = start_server if self.strict else benchkit.start_server
        server = launch(db_path, *extra_args, log_dir=self.log_dir)
        self.started.append(server)
        return server

    def kill_all(self) -> None:
        for server in self.started:
            server.ensure_dead()


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 15.0, interval: float = 0.01,
             detail: Callable[[], str] | None = None) -> Any:
    """Poll until `predicate()` is truthy and return its value; fail (never hang) if it is not within
    `timeout`, with `detail()` in the message. The suite's one poll: every wait for an event comes here."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}" + (f"\n{detail()}" if detail is not None else ""))
        time.sleep(interval)
