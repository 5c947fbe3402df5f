"""The database file holds every message and the receipt-handle key: a server creates it, and its -wal
and -shm, readable by its user alone, and tightens an existing one that others may read (saying so)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.server_process


def _modes(db: Path) -> dict[str, str]:
    return {p.name: oct(p.stat().st_mode & 0o777) for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()}


def test_a_server_started_on_a_database_others_may_read_makes_it_private_and_logs_it(
        server_factory: Any, tmp_path: Path) -> None:
    db = tmp_path / "queueserver.db"
    first = server_factory(db, "--test-clock")
    assert set(_modes(db).values()) == {"0o600"}
    first.stop()
    for name in _modes(db):
        os.chmod(tmp_path / name, 0o644)  # as a copy or a restore under umask 022 leaves it
    server = server_factory(db, "--test-clock")
    assert set(_modes(db).values()) == {"0o600"}
    assert f"{db} was readable by others (mode 644): made private (600)" in server.stderr_text()
