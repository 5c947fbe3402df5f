"""Fixtures of the worker tests: real queueserver processes, boto3 clients, clocks, workers.

Self-contained (it does not use tests/conftest.py). Two servers per session: one on
the manual test clock (most tests move it instead of sleeping) and one on the real
clock, for the heartbeat test that runs on real time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # workerkit and the CLI's test handlers, whatever the import mode
    sys.path.insert(0, str(HERE))

from serverkit import start as start_server
from workerkit import LockstepClock, Server, ServerClock, queue_factory

from queueserver.consumer import Worker


@pytest.fixture(scope="session")
def test_clock_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_server(tmp_path_factory.mktemp("consumer") / "test-clock.db", "--test-clock")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def real_clock_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_server(tmp_path_factory.mktemp("consumer") / "real-clock.db")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def boto_session() -> boto3.session.Session:
    return boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")


def _client(session: boto3.session.Session, endpoint: str) -> Any:
    return session.client("sqs", endpoint_url=endpoint,
                          config=Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=45))


@pytest.fixture
def sqs(boto_session: boto3.session.Session, test_clock_server: Server) -> Iterator[Any]:
    """A client of the test-clock server."""
    client = _client(boto_session, test_clock_server.endpoint)
    yield client
    client.close()


@pytest.fixture
def real_sqs(boto_session: boto3.session.Session, real_clock_server: Server) -> Iterator[Any]:
    """A client of the real-clock server."""
    client = _client(boto_session, real_clock_server.endpoint)
    yield client
    client.close()


@pytest.fixture
def server_clock(test_clock_server: Server) -> ServerClock:
    return ServerClock(test_clock_server.endpoint)


@pytest.fixture
def lockstep(server_clock: ServerClock) -> LockstepClock:
    return LockstepClock(server_clock)


@pytest.fixture
def make_queue(sqs: Any) -> Callable[..., str]:
    """make_queue(attributes=None, fifo=False) -> the URL of a fresh queue on the test-clock server."""
    return queue_factory(sqs)


@pytest.fixture
def start_worker(server_clock: ServerClock) -> Iterator[Callable[..., Worker]]:
    """start_worker(client, queue_url, handler, **options) -> a started Worker (1 s long polls by default).

    Every worker is stopped and joined at teardown, so no thread outlives its test; the
    test clock is moved past the long polls still waiting, so the stop does not wait for them.
    """
    workers: list[Worker] = []

    def start(client: Any, queue_url: str, handler: Callable[..., Any], **options: Any) -> Worker:
        options.setdefault("wait_time_seconds", 1)
        worker = Worker(client, queue_url, handler, **options)
        workers.append(worker)
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()
    if workers:
        server_clock.advance(20)
    for worker in workers:
        assert worker.join(timeout=60), "a worker did not stop"
