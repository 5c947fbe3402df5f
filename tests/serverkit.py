"""A queueserver child process and a bounded wait, shared by the worker and Spark tests."""

from __future__ import annotations

import os
import queue as queue_module
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 20.0


class Server:
    """A `python -m queueserver serve` child process on a free loopback port."""

    def __init__(self, db: Path, *extra: str) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        self.stderr_path = db.with_suffix(".stderr.log")
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "queueserver", "serve", "--port", "0", "--db", str(db), *extra],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr)
        lines: queue_module.Queue[str] = queue_module.Queue()
        self._reader = threading.Thread(target=self._read_stdout, args=(lines,), daemon=True)
        self._reader.start()
        try:
            first = lines.get(timeout=READY_TIMEOUT_S)
        except queue_module.Empty:
            first = ""
        if not first.startswith("READY "):
            self.stop()
            pytest.fail(f"queueserver did not get ready (first line {first!r}):\n{self.stderr_path.read_text()}")
        self.endpoint = first.split(" ", 1)[1].strip()

    def _read_stdout(self, lines: queue_module.Queue[str]) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            lines.put(raw.decode("utf-8", "replace"))
        lines.put("")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()


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
