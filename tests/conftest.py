"""Shared fixtures: a real queueserver process on a free loopback port, boto3 clients, the test clock."""

from __future__ import annotations

import os
import queue as queue_module
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import boto3
import pytest
from botocore.config import Config

REPO_ROOT = Path(__file__).resolve().parent.parent
INTEGRATION_DIR = Path(__file__).resolve().parent / "integration"
# The integration tests import their plain helpers (sqs_testkit) by module name;
# make that work whatever pytest import mode is configured.
if str(INTEGRATION_DIR) not in sys.path:
    sys.path.insert(0, str(INTEGRATION_DIR))

from query_client import make_query_client  # noqa: E402
from sqs_testkit import ClockControl, unique_queue_name  # noqa: E402

READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 15.0
READY_RE = re.compile(r"^READY (http://127\.0\.0\.1:(\d+))$")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "server_process: the test starts and stops its own queueserver processes"
    )


# --- the server process ----------------------------------------------------------


class ServerProcess:
    """A running `python -m queueserver serve` child process."""

    def __init__(self, proc: subprocess.Popen[bytes], endpoint: str, stderr_path: Path,
                 stderr_file: IO[bytes], extra_stdout: list[str], stdout_thread: threading.Thread):
        self.proc = proc
        self.endpoint = endpoint
        self.stderr_path = stderr_path
        self._stderr_file = stderr_file
        self.extra_stdout = extra_stdout  # stdout lines printed after READY (there should be none)
        self._stdout_thread = stdout_thread

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return "<no stderr>"

    def _finish(self) -> None:
        self._stdout_thread.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if not self._stderr_file.closed:
            self._stderr_file.close()

    def kill(self) -> None:
        """SIGKILL: no chance to flush or clean up."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self._finish()

    def stop(self) -> None:
        """SIGTERM, wait, and insist on a clean exit (rc 0)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._finish()
            pytest.fail(f"queueserver did not exit within {STOP_TIMEOUT_S}s of SIGTERM\n"
                        f"--- stderr ---\n{self.stderr_text()}")
        self._finish()
        assert rc == 0, f"queueserver exited with {rc} after SIGTERM\n--- stderr ---\n{self.stderr_text()}"

    def ensure_dead(self) -> None:
        """Teardown safety net: never leave a child behind."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._finish()


def start_server(db_path: str | os.PathLike[str], *extra_args: str) -> ServerProcess:
    """Start queueserver on a free port and wait for its READY line."""
    db_path = Path(db_path)
    stderr_path = db_path.with_name(f"{db_path.name}.{uuid.uuid4().hex[:8]}.stderr.log")
    stderr_file = open(stderr_path, "wb")  # noqa: SIM115 - closed by ServerProcess
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [sys.executable, "-m", "queueserver", "serve", "--host", "127.0.0.1", "--port", "0",
           "--db", str(db_path), *extra_args]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=stderr_file)
    lines: queue_module.Queue[str | None] = queue_module.Queue()
    extra_stdout: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        first = True
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if first:
                lines.put(line)
                first = False
            else:
                extra_stdout.append(line)
        if first:
            lines.put(None)

    thread = threading.Thread(target=pump, name=f"queueserver-stdout-{proc.pid}", daemon=True)
    thread.start()
    server = ServerProcess(proc, "", stderr_path, stderr_file, extra_stdout, thread)
    try:
        first_line = lines.get(timeout=READY_TIMEOUT_S)
    except queue_module.Empty:
        first_line = None
    match = READY_RE.match(first_line) if first_line is not None else None
    if match is None:
        server.ensure_dead()
        pytest.fail(
            f"queueserver did not print 'READY http://127.0.0.1:PORT' within {READY_TIMEOUT_S}s "
            f"(first stdout line: {first_line!r}, rc={proc.returncode})\n"
            f"command: {' '.join(cmd)}\n--- stderr ---\n{server.stderr_text()}"
        )
    server.endpoint = match.group(1)
    return server


# --- fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def boto_session() -> boto3.session.Session:
    # One session: building clients from it reuses the loaded service model (fast).
    return boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test",
                                 region_name="us-east-1")


@pytest.fixture(scope="session", params=["json", "query"])
def make_client(request: pytest.FixtureRequest, boto_session: boto3.session.Session) -> Any:
    """make_client(endpoint, region="us-east-1", **config_kwargs) -> an SQS client.

    Parametrised over both wire protocols: every test that talks through it runs once with
    boto3's AWS JSON 1.0 client and once with a botocore client speaking Query/XML.
    """
    if request.param == "query":
        return make_query_client

    def factory(endpoint: str, region: str = "us-east-1", **config_kwargs: Any) -> Any:
        config = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=45,
                        **config_kwargs)
        return boto_session.client("sqs", region_name=region, endpoint_url=endpoint,
                                   aws_access_key_id="test", aws_secret_access_key="test",
                                   config=config)

    return factory


@pytest.fixture
def server_factory() -> Iterator[Any]:
    """server_factory(db_path, *extra_args) -> ServerProcess; every one is dead after the test."""
    started: list[ServerProcess] = []

    def factory(db_path: str | os.PathLike[str], *extra_args: str) -> ServerProcess:
        proc = start_server(db_path, *extra_args)
        started.append(proc)
        return proc

    yield factory
    for proc in started:
        proc.ensure_dead()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The shared server (manual clock, no cooldowns)."""
    db = tmp_path_factory.mktemp("server") / "queueserver.db"
    proc = start_server(db, "--test-clock")
    try:
        yield proc
    finally:
        if proc.proc.poll() is None:
            proc.stop()
        else:
            proc.ensure_dead()
            pytest.fail(f"the shared queueserver died during the session (rc={proc.proc.returncode})"
                        f"\n--- stderr ---\n{proc.stderr_text()}")


@pytest.fixture
def sqs(server: ServerProcess, make_client: Any) -> Any:
    return make_client(server.endpoint)


@pytest.fixture
def sqs_unvalidated(server: ServerProcess, make_client: Any) -> Any:
    """A client that skips botocore's client-side checks, to reach the server's own."""
    return make_client(server.endpoint, parameter_validation=False)


@pytest.fixture(scope="session")
def clock(server: ServerProcess) -> ClockControl:
    return ClockControl(server.endpoint)


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    return unique_queue_name(request.node.originalname.removeprefix("test_"))


@pytest.fixture
def make_queue(sqs: Any, request: pytest.FixtureRequest) -> Any:
    """make_queue(attributes=None, tags=None, name=None) -> queue URL (a fresh, unique queue)."""

    def factory(attributes: dict[str, str] | None = None, tags: dict[str, str] | None = None,
                name: str | None = None) -> str:
        kwargs: dict[str, Any] = {"QueueName": name or unique_queue_name(
            request.node.originalname.removeprefix("test_"))}
        if attributes:
            kwargs["Attributes"] = attributes
        if tags:
            kwargs["tags"] = tags
        return sqs.create_queue(**kwargs)["QueueUrl"]

    return factory


@pytest.fixture
def queue_url(make_queue: Any) -> str:
    """A fresh standard queue with default attributes."""
    return make_queue()


@pytest.fixture(scope="module")
def cooldown_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with AWS's 60-second rules on (and a manual clock to get past them)."""
    db = tmp_path_factory.mktemp("cooldowns") / "cooldowns.db"
    proc = start_server(db, "--test-clock", "--enforce-cooldowns")
    try:
        yield proc
    finally:
        if proc.proc.poll() is None:
            proc.stop()
        else:
            proc.ensure_dead()
