"""The server process for every tier: queueserver.testing's `QueueServer`, with pytest's way of failing.

`start_server` gives a started `QueueServer` (no test clock unless `--test-clock` is among its
arguments; region and account left to them); a start that does not reach READY fails the test and
its `stop()` insists on a clean exit (`StrictServer`). `Servers` kills whatever a test started;
`try_serve` runs a start that must be refused; `run_queueserver` runs the admin commands.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from queueserver.limits import DEFAULT_ACCOUNT as ACCOUNT
from queueserver.testing import QueueServer, QueueServerError, StartAttempt

__all__ = ["ACCOUNT", "REPO_ROOT", "ClockControl", "Refusal", "Server", "ServerError", "Servers", "StrictServer",
           "advance_clock", "integrity", "run_queueserver", "running", "sh", "start", "start_server", "try_serve",
           "wait_for"]

REPO_ROOT = Path(__file__).resolve().parents[2]
STOP_TIMEOUT_S = 15.0
READY_TIMEOUT_S = 15.0
SLOW_READY_TIMEOUT_S = 20.0  # the worker and Spark tiers start servers beside busy JVMs and threads

Server = QueueServer  # a started server, as the tests annotate it
ServerError = QueueServerError
Refusal = StartAttempt


class StrictServer(QueueServer):
    """A QueueServer whose failures fail the test: a start that does not reach READY, a stop that is not clean."""

    def start(self) -> StrictServer:
        try:
            super().start()
        except QueueServerError as exc:
            pytest.fail(str(exc), pytrace=False)
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S, *, check: bool = True) -> int:
        try:
            return super().stop(timeout, check=check)
        except QueueServerError as exc:
            pytest.fail(str(exc), pytrace=False)


def _server(db_path: str | os.PathLike[str], extra_args: tuple[str, ...], *, strict: bool, ready_timeout: float,
            log_dir: str | os.PathLike[str] | None) -> QueueServer:
    """A server on `db_path` whose stderr goes to a file of its own in `log_dir` (default: beside the
    database; give another folder when the database's filesystem is about to fill up or turn read-only)."""
    db_path = Path(db_path)
    folder = Path(log_dir) if log_dir is not None else db_path.parent
    kind = StrictServer if strict else QueueServer
    return kind(db_path, region=None, account_id=None, test_clock=False, extra_args=extra_args,
                ready_timeout=ready_timeout, log_path=folder / f"{db_path.name}.{uuid.uuid4().hex[:8]}.stderr.log")


def start_server(db_path: str | os.PathLike[str], *extra_args: str, ready_timeout: float = READY_TIMEOUT_S,
                 log_dir: str | os.PathLike[str] | None = None, strict: bool = True) -> QueueServer:
    """`queueserver serve --port 0 --db DB EXTRA...`, started; a start that fails fails the test (or, not
    `strict`, raises ServerError, and `stop()` returns whatever exit code it had)."""
    return _server(db_path, extra_args, strict=strict, ready_timeout=ready_timeout, log_dir=log_dir).start()


def start(db: Path, *extra: str) -> QueueServer:
    """A server with a longer READY wait (worker and Spark tiers); stop() it."""
    return start_server(db, *extra, ready_timeout=SLOW_READY_TIMEOUT_S)


@contextlib.contextmanager
def running(db_path: str | os.PathLike[str], *extra_args: str) -> Iterator[QueueServer]:
    """A server for the `with` block, which must stop cleanly (exit code 0) at its end."""
    server = start_server(db_path, *extra_args)
    try:
        yield server
    finally:
        try:
            server.stop()
        finally:
            server.kill()


class Servers:
    """Starts queueserver processes and kills whatever is still running at teardown.

    Their stderr logs go to `log_dir` when given (the crash tier keeps them on the ordinary
    disk, so that a log line about a full or read-only filesystem is not lost on that very
    filesystem). `strict` servers are `StrictServer`s; the others raise ServerError when a start
    fails, and may exit as they will.
    """

    def __init__(self, log_dir: Path | None = None, *, strict: bool = False) -> None:
        self.started: list[QueueServer] = []
        self.log_dir = log_dir
        self.strict = strict

    def start(self, db_path: str | os.PathLike[str], *extra_args: str) -> QueueServer:
        server = _server(db_path, extra_args, strict=self.strict, ready_timeout=READY_TIMEOUT_S, log_dir=self.log_dir)
        self.started.append(server)
        return server.start()

    def kill_all(self) -> None:
        for server in self.started:
            server.kill()


def try_serve(db_path: str | os.PathLike[str], *extra_args: str, timeout: float = 15) -> Refusal:
    """Run `serve` where it should refuse to start: wait until it exits, prints READY, or times out.
    Its stderr goes to a folder of its own (the database's may be full or read-only)."""
    folder = Path(tempfile.mkdtemp(prefix="queueserver-refusal-"))
    try:
        return _server(db_path, extra_args, strict=False, ready_timeout=timeout, log_dir=folder).try_start(timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_queueserver(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `python -m queueserver ARGS…` to completion (backup, check, restore, copy)."""
    return subprocess.run([sys.executable, "-m", "queueserver", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, check=False)


def sh(*cmd: str) -> str:
    """Run a command that must succeed (mount, umount, …); returns its stdout."""
    result = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def integrity(db_path: str | os.PathLike[str]) -> str:
    conn = sqlite3.connect(db_path)
    try:
        return "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


class ClockControl:
    """Drives a `--test-clock` server's manual clock through /_queueserver/clock."""

    def __init__(self, endpoint: str):
        self.url = endpoint.rstrip("/") + "/_queueserver/clock"

    def _call(self, method: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(self.url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
            result: dict[str, Any] = json.loads(resp.read())
            return result

    def now_ms(self) -> int:
        return int(self._call("GET")["now_ms"])

    def timers(self) -> int:
        """Wake-ups pending on the server's manual clock: each waiting long poll has one."""
        return int(self._call("GET")["timers"])

    def wait_for_timers(self, count: int, timeout: float = 10) -> None:
        """Until at least `count` wake-ups are pending: a long poll started has reached its wait."""
        wait_for(lambda: self.timers() >= count, f"{count} long polls waiting", timeout)

    def advance(self, seconds: float) -> int:
        """Move the clock forward; returns the new now_ms."""
        before = self.now_ms()
        now = int(self._call("POST", {"advance_seconds": float(seconds)})["now_ms"])
        assert now >= before + int(seconds * 1000) - 1, (before, now, seconds)
        return now


def advance_clock(endpoint: str, seconds: float) -> int:
    return ClockControl(endpoint).advance(seconds)


def free_port() -> int:
    """A loopback port free now, for a helper process (moto, sshd) that cannot pick its own."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def end_process(proc: subprocess.Popen[Any], timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout`; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
