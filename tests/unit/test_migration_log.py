"""A start that applies migrations says so in one log line: the schema version and how many it applied."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from queueserver.storage.migrations import available_migrations, migrate

LOGGER = "queueserver.storage.migrations"


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.INFO]


def test_a_new_database_logs_one_line_with_every_migration_applied(caplog: pytest.LogCaptureFixture) -> None:
    latest = len(available_migrations())
    caplog.set_level(logging.DEBUG, LOGGER)
    with sqlite3.connect(":memory:", isolation_level=None) as conn:
        assert migrate(conn) == latest
        assert _lines(caplog) == [f"database at version {latest}, applied {latest} migrations"]
        caplog.clear()
        migrate(conn)
        assert _lines(caplog) == []  # an up-to-date database: said in debug only
        assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
            f"database at version {latest}, applied 0 migrations"]
