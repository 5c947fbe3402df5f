"""Shared fixtures: a real queueserver process on a free loopback port, boto3 clients, the test clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clients import json_client, make_query_client
from support.server import ClockControl, Servers, StrictServer, start_server
from support.sqs import unique_queue_name


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "server_process: the test starts and stops its own queueserver processes"
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("soak", "the soak runs (-m soak tests/crash)")
    group.addoption("--soak-kills", type=int, default=200, help="SIGKILLs of the soak run (default 200)")
    group.addoption("--soak-seconds-between", type=float, default=1.5,
                    help="mean seconds of load between two kills; each gap is uniform in [0.5x, 1.5x] (default 1.5)")
    group.addoption("--soak-seed", type=int, default=None, help="the soak run's random seed (default: random)")
    group.addoption("--soak-losses", type=int, default=10,
                    help="losses of the machine whose loss window the soak run measures (default 10)")


# --- fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="session", params=["json", "query"])
def make_client(request: pytest.FixtureRequest) -> Any:
    """make_client(endpoint, region="us-east-1", **config_kwargs) -> an SQS client.

    Parametrised over both wire protocols: every test that talks through it runs once with
    boto3's AWS JSON 1.0 client and once with a botocore client speaking Query/XML.
    """
    return make_query_client if request.param == "query" else json_client


@pytest.fixture
def server_factory() -> Iterator[Any]:
    """server_factory(db_path, *extra_args) -> StrictServer; every one is dead after the test."""
    started = Servers(strict=True)
    yield started.start
    started.kill_all()


@pytest.fixture
def serve_with_client(server_factory: Any, make_client: Any) -> Any:
    """serve_with_client(db_path, *extra_args) -> (a `--test-clock` server on that file, a client of it).

    For the tests that stop or kill a server and start another on the same file; the client
    speaks this run's wire protocol.
    """

    def start(db_path: Path, *extra_args: str) -> tuple[StrictServer, Any]:
        proc = server_factory(db_path, "--test-clock", *extra_args)
        return proc, make_client(proc.endpoint)

    return start


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StrictServer]:
    """The shared server (manual clock, no cooldowns)."""
    yield from _serve_shared(tmp_path_factory.mktemp("server") / "queueserver.db", "--test-clock")


def _serve_shared(db: Path, *extra_args: str) -> Iterator[StrictServer]:
    """A server that many tests share: stopped cleanly at the end, and a failure if it died before."""
    proc = start_server(db, *extra_args)
    try:
        yield proc
    finally:
        if proc.running:
            proc.stop()
        else:
            proc.kill()
            pytest.fail(f"a shared queueserver died during the tests (rc={proc.returncode})"
                        f"\n--- stderr ---\n{proc.stderr_text()}")


@pytest.fixture
def sqs(server: StrictServer, make_client: Any) -> Any:
    return make_client(server.endpoint)


@pytest.fixture
def sqs_unvalidated(server: StrictServer, make_client: Any) -> Any:
    """A client that skips botocore's client-side checks, to reach the server's own."""
    return make_client(server.endpoint, parameter_validation=False)


@pytest.fixture(scope="session")
def clock(server: StrictServer) -> ClockControl:
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
def cooldown_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StrictServer]:
    """A server with AWS's 60-second rules on (and a manual clock to get past them)."""
    yield from _serve_shared(tmp_path_factory.mktemp("cooldowns") / "cooldowns.db", "--test-clock",
                             "--enforce-cooldowns")
