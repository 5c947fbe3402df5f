"""Fixtures of the hostile-input tests: which wire protocol a run speaks, and a check that the
shared server logged no traceback meanwhile."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def protocol(request: pytest.FixtureRequest, make_client: Any) -> str:
    """The wire protocol of this run: the suite runs every test once per protocol (make_client)."""
    return str(request.node.callspec.params["make_client"])


@pytest.fixture
def no_new_traceback(server: Any) -> Any:
    before = server.stderr_text().count("Traceback")
    yield
    assert server.stderr_text().count("Traceback") == before, server.stderr_text()[-3000:]
