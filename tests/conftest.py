"""Shared fixtures: a real queueserver process on a free loopback port, boto3 clients, the test clock."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

TESTS_DIR = Path(__file__).resolve().parent
# The tests import their plain helpers (serverproc, serverkit, sqs_testkit …) by module
# name; make that work whatever pytest import mode is configured.
for helpers in (TESTS_DIR, TESTS_DIR / "integration"):
    if str(helpers) not in sys.path:
        sys.path.insert(0, str(helpers))

import serverproc  # noqa: E402
from query_client import make_query_client  # noqa: E402
from sqs_testkit import ClockControl, unique_queue_name  # noqa: E402

STOP_TIMEOUT_S = 15.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "server_process: the test starts and stops its own queueserver processes"
    )


# --- the server process ----------------------------------------------------------


class ServerProcess(serverproc.Server):
    """A queueserver child process whose stop() insists on a clean exit (rc 0)."""

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        try:
            rc = super().stop(timeout)
        except serverproc.ServerError as exc:
            pytest.fail(str(exc))
        assert rc == 0, f"queueserver exited with {rc} after SIGTERM\n--- stderr ---\n{self.stderr_text()}"
        return rc


def start_server(db_path: str | os.PathLike[str], *extra_args: str) -> ServerProcess:
    """Start queueserver on a free port and wait for its READY line."""
    try:
        server = serverproc.start_server(db_path, *extra_args, server_class=ServerProcess)
    except serverproc.ServerError as exc:
        pytest.fail(str(exc))
    assert isinstance(server, ServerProcess)
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
