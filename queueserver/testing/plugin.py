"""The pytest plugin: `queueserver`, `queueserver_session` and `sqs` fixtures on real servers.

Registered through the `pytest11` entry point as `queueserver` (`-p no:queueserver` turns it
off). Each pytest-xdist worker is its own process, so it starts its own servers on its own
free ports and its own files: nothing is shared between workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from queueserver.testing.server import QueueServer

_LOG_TAIL = 20_000  # characters of a server's log attached to a failure report


@dataclass
class _Use:
    """A server a test used, and where the server's log stood when the test began."""

    server: QueueServer
    log_offset: int
    keep_on_failure: bool


_USES = pytest.StashKey[list[_Use]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("queueserver", "queueserver: real servers for tests")
    group.addoption("--queueserver-keep-db", action="store_true", default=False,
                    help="keep the database file of a test that failed (queueserver fixture) and print its path")
    group.addoption("--queueserver-no-log", action="store_true", default=False,
                    help="do not attach the server's log to the report of a failed test")


def _track(node: pytest.Item, server: QueueServer, keep_on_failure: bool) -> None:
    offset = server.log_path.stat().st_size if server.log_path.exists() else 0
    node.stash.setdefault(_USES, []).append(_Use(server, offset, keep_on_failure))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report: pytest.TestReport = outcome.get_result()
    uses = item.stash.get(_USES, [])
    if not report.failed or not uses:
        return
    for use in uses:
        if not item.config.getoption("queueserver_no_log"):
            text = use.server.log_text()[use.log_offset:]
            if len(text) > _LOG_TAIL:
                text = "[...]\n" + text[-_LOG_TAIL:]
            report.sections.append((f"queueserver log ({use.server.db_path})", text or "(empty)"))
        if use.keep_on_failure and item.config.getoption("queueserver_keep_db"):
            use.keep_on_failure = False  # once is enough: setup, call and teardown may each fail
            use.server.keep_files = True
            report.sections.append(("queueserver database", f"kept at {use.server.db_path}"))


@pytest.fixture
def queueserver(request: pytest.FixtureRequest) -> Iterator[QueueServer]:
    """A fresh server on its own database for this test, on the manual test clock."""
    server = QueueServer()
    _track(request.node, server, keep_on_failure=True)
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def _queueserver_shared() -> Iterator[QueueServer]:
    server = QueueServer().start()
    yield server
    server.close()


@pytest.fixture
def queueserver_session(request: pytest.FixtureRequest, _queueserver_shared: QueueServer) -> Iterator[QueueServer]:
    """One server for the whole session (faster); every queue is deleted after each test.

    Its test clock only moves forward: a test that advanced it leaves it advanced.
    """
    server = _queueserver_shared
    if not server.running:  # a previous test stopped or killed it
        server.start()
    _track(request.node, server, keep_on_failure=False)
    yield server
    if not server.running:
        server.start()
    server.delete_all_queues()


@pytest.fixture
def sqs(queueserver: QueueServer) -> Any:
    """A boto3 SQS client on this test's `queueserver`."""
    return queueserver.client()
