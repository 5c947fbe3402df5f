"""message_store's SQL on a real, migrated SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from queueserver.models import NewMessage
from queueserver.storage import message_store
from queueserver.storage.migrations import migrate


def test_optional_parts_left_out_are_stored_as_null_and_the_rest_as_given(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    plain = NewMessage(body="plain", md5_of_body="m1", delay_seconds=0)
    full = NewMessage(body="full", md5_of_body="m2", delay_seconds=5,
                      attributes={"a": {"DataType": "String", "StringValue": "v"}},
                      trace_header="Root=1-abc", group_id="g", deduplication_id="d")
    message_store.insert_messages(conn, 7, [(1, "id-1", plain), (2, "id-2", full)], 1_000, "sender")

    rows = conn.execute(
        "SELECT m.id, m.queue_id, m.visible_at_ms, m.group_id, b.message_id, b.body, b.attributes,"
        " b.trace_header, b.deduplication_id, b.sender_id FROM messages m JOIN message_bodies b USING (id)"
        " ORDER BY m.id").fetchall()
    assert rows == [
        (1, 7, 1_000, None, "id-1", "plain", None, None, None, "sender"),
        (2, 7, 6_000, "g", "id-2", "full", '{"a":{"DataType":"String","StringValue":"v"}}', "Root=1-abc", "d",
         "sender"),
    ]
    conn.close()
