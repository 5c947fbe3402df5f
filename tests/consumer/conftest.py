"""Fixtures of the worker tests: real queueserver processes, boto3 clients, clocks, workers.

Two servers of the tier's own per session: one on the manual test clock (most tests move
it instead of sleeping) and one on the real clock, for the heartbeat test that runs on
real time. Their clients are boto3's JSON client only (the worker is a boto3 program).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.clients import json_client
from support.server import ClockControl, Server, start
from support.workers import LockstepClock, queue_factory

from queueserver.consumer import Worker


@pytest.fixture(scope="session")
def test_clock_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start(tmp_path_factory.mktemp("consumer") / "test-clock.db", "--test-clock")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def real_clock_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start(tmp_path_factory.mktemp("consumer") / "real-clock.db")
    yield server
    server.stop()


@pytest.fixture
def worker_sqs(test_clock_server: Server) -> Iterator[Any]:
    """A JSON client of the worker tier's test-clock server."""
    client = json_client(test_clock_server.endpoint)
    yield client
    client.close()


@pytest.fixture
def real_sqs(real_clock_server: Server) -> Iterator[Any]:
    """A JSON client of the worker tier's real-clock server."""
    client = json_client(real_clock_server.endpoint)
    yield client
    client.close()


@pytest.fixture
def server_clock(test_clock_server: Server) -> ClockControl:
    return ClockControl(test_clock_server.endpoint)


@pytest.fixture
def lockstep(server_clock: ClockControl) -> LockstepClock:
    return LockstepClock(server_clock)


@pytest.fixture
def make_worker_queue(worker_sqs: Any) -> Callable[..., str]:
    """make_worker_queue(attributes=None, fifo=False) -> the URL of a fresh queue on the test-clock server."""
    return queue_factory(worker_sqs)


@pytest.fixture
def start_worker(server_clock: ClockControl) -> Iterator[Callable[..., Worker]]:
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
