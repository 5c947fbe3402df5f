"""Fixtures of the Query/XML protocol tests: a botocore client speaking Query, raw XML requests.

The server fixtures (`server`, `clock`, `queue_name`, ...) come from tests/conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.clients import make_query_client


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "oldclient: installs an older boto3 that speaks Query to SQS (from the package registry, "
        "cached under .cache/) and runs it against the server",
    )


@pytest.fixture
def qsqs(server: Any) -> Any:
    """A Query client with botocore's own parse of the XML (no JSON-compatibility filling)."""
    return make_query_client(server.endpoint, json_compatible=False)


@pytest.fixture
def qsqs_unvalidated(server: Any) -> Any:
    """A Query client that skips botocore's client-side checks, to reach the server's own."""
    return make_query_client(server.endpoint, json_compatible=False, parameter_validation=False)


@pytest.fixture
def make_qqueue(qsqs: Any, queue_name: str) -> Any:
    """make_qqueue(suffix="", **create_kwargs) -> the URL of a fresh queue created over Query."""

    def factory(suffix: str = "", **kwargs: Any) -> str:
        return qsqs.create_queue(QueueName=f"{queue_name}{suffix}", **kwargs)["QueueUrl"]

    return factory
