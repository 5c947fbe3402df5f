"""moto's server mode, a second implementation of AWS's APIs, as a process on a free loopback port.

The worker tier runs its tests against it as well as against queueserver (the worker is an SQS
client and must not depend on this server), and the replication tests use its S3 as the stand-in
for object storage. Any tier can use it: `with moto_server(log_dir) as moto: ... moto.endpoint`.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.server import end_process, free_port, wait_for

READY_TIMEOUT_S = 30.0
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass
class MotoServer:
    endpoint: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def moto_server(log_dir: Path) -> Iterator[MotoServer]:
    """moto_server on 127.0.0.1 until the block ends; a start that fails fails the test (with moto's log)."""
    port = free_port()
    log_path = log_dir / f"moto-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    server = MotoServer(f"http://127.0.0.1:{port}", proc, log_path)
    try:
        def answers() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"moto's server exited at start (port {port})\n{server.log_text()}")
            return _answers(server.endpoint)

        wait_for(answers, f"moto's server to answer on port {port}", timeout=READY_TIMEOUT_S, interval=0.1,
                 detail=server.log_text)
        yield server
    finally:
        end_process(proc)
