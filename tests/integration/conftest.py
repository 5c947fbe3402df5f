"""Fixtures of the credential tests (test_auth_*): a server that verifies signatures, and Alice's clients.

The server has credentials on (tests/support/auth.py's keys) and the manual clock; the clients
sign with real keys, over each wire protocol in turn (`protocol`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from support.auth import signed_client, write_credentials
from support.server import Server, start


@pytest.fixture(scope="module")
def auth_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of `auth_server`'s database (auth.db) and credentials file (keys.toml)."""
    return tmp_path_factory.mktemp("auth")


@pytest.fixture(scope="module")
def auth_server(auth_folder: Path) -> Iterator[Server]:
    """A `--test-clock` server with credentials on, one per module."""
    folder = auth_folder
    server = start(folder / "auth.db", "--test-clock", "--credentials", str(write_credentials(folder / "keys.toml")))
    yield server
    assert server.stop() == 0


@pytest.fixture(params=["json", "query"])
def protocol(request: pytest.FixtureRequest) -> str:
    """The wire protocol a signed client speaks (every test that asks runs once per protocol)."""
    return str(request.param)


@pytest.fixture
def alice(auth_server: Server, protocol: str) -> Any:
    return signed_client(protocol, auth_server.endpoint, "AKIDALICE")


@pytest.fixture
def alice_queue_url(alice: Any, request: pytest.FixtureRequest) -> str:
    """A queue of Alice's, named after the test and its protocol."""
    name = f"{request.node.originalname.removeprefix('test_')[:60]}-{request.node.callspec.id}"
    return str(alice.create_queue(QueueName=name)["QueueUrl"])


@pytest.fixture
def sns(server: Server) -> Any:
    """boto3's SNS client on the session's server: the topics of the same port and database."""
    return boto3.client("sns", endpoint_url=server.endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")
