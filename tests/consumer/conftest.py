"""Fixtures of the worker tests: real queueserver processes, boto3 clients, clocks, workers.

Two servers of the tier's own per session: one on the manual test clock (most tests move
it instead of sleeping) and one on the real clock, for the heartbeat test that runs on
real time. Their clients are boto3's JSON client only (the worker is a boto3 program).

The worker is an SQS client that must run unchanged on AWS, so every test that talks to a
server runs twice: against queueserver and against moto's server, a second implementation of
SQS. On moto, the tests that move queueserver's test clock (`server_clock`, `lockstep`: an
extension of this server's) skip, saying so; everything else runs there as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.clients import json_client
from support.moto import MotoServer, moto_server
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


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    with moto_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture(scope="session", params=["queueserver", "moto"])
def sqs_implementation(request: pytest.FixtureRequest) -> str:
    """Which SQS the worker talks to: this server, or moto's (a second implementation)."""
    return str(request.param)


@pytest.fixture
def worker_endpoint(sqs_implementation: str, request: pytest.FixtureRequest) -> str:
    """The endpoint of the SQS under test: queueserver on its test clock, or moto."""
    server = "moto" if sqs_implementation == "moto" else "test_clock_server"
    return str(request.getfixturevalue(server).endpoint)


@pytest.fixture
def worker_sqs(worker_endpoint: str) -> Iterator[Any]:
    """A JSON client of the SQS under test."""
    client = json_client(worker_endpoint)
    yield client
    client.close()


@pytest.fixture
def real_sqs(sqs_implementation: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A JSON client of an SQS on the real clock: queueserver's real-clock server, or moto (always real)."""
    server = "moto" if sqs_implementation == "moto" else "real_clock_server"
    client = json_client(request.getfixturevalue(server).endpoint)
    yield client
    client.close()


@pytest.fixture
def server_clock(sqs_implementation: str, request: pytest.FixtureRequest) -> ClockControl:
    if sqs_implementation == "moto":
        pytest.skip("moves queueserver's test clock (POST /_queueserver/clock), an extension moto does not have")
    return ClockControl(request.getfixturevalue("test_clock_server").endpoint)


@pytest.fixture
def lockstep(server_clock: ClockControl) -> LockstepClock:
    return LockstepClock(server_clock)


@pytest.fixture
def make_worker_queue(worker_sqs: Any) -> Callable[..., str]:
    """make_worker_queue(attributes=None, fifo=False) -> the URL of a fresh queue on the test-clock server."""
    return queue_factory(worker_sqs)


@pytest.fixture
def start_worker(sqs_implementation: str, request: pytest.FixtureRequest) -> Iterator[Callable[..., Worker]]:
    """start_worker(client, queue_url, handler, **options) -> a started Worker (1 s long polls by default).

    Every worker is stopped and joined at teardown, so no thread outlives its test; on queueserver
    the test clock is moved past the long polls still waiting, so the stop does not wait for them
    (on moto it waits for them: a second at most).
    """
    workers: list[Worker] = []
    clock = (ClockControl(request.getfixturevalue("test_clock_server").endpoint)
             if sqs_implementation == "queueserver" else None)

    def start(client: Any, queue_url: str, handler: Callable[..., Any], **options: Any) -> Worker:
        options.setdefault("wait_time_seconds", 1)
        worker = Worker(client, queue_url, handler, **options)
        workers.append(worker)
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()
    if workers and clock is not None:
        clock.advance(20)
    for worker in workers:
        assert worker.join(timeout=60), "a worker did not stop"
