"""What an index on messages costs the send path, on the database thread alone.

Runs the writer's INSERTs (message_store.insert_messages) in groups of 16 one-message operations,
each in its own savepoint as database.py runs them, into a fresh file with and without the index,
interleaved, and prints CPU microseconds per message.

Usage: .venv/bin/python scripts/bench send-index [--index messages_by_queue] [--messages 100000] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from queueserver.models import NewMessage
from queueserver.storage import message_store
from queueserver.storage.migrations import migrate
from queueserver.storage.sqlite_file import connect


def per_message_us(path: str, drop: str | None, messages: int) -> float:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    conn = connect(path)
    migrate(conn)
    if drop:
        conn.execute(f"DROP INDEX {drop}")
    conn.execute("INSERT INTO queues (id, region, account, name, fifo, attributes, tags, created_at_ms, modified_at_ms)"
                 " VALUES (1, 'r', 'a', 'q', 0, '{}', '{}', 0, 0)")
    message = NewMessage(body="x" * 100, md5_of_body="m", delay_seconds=0)
    row_id = 1
    started = time.process_time()  # CPU time: other processes on a shared machine disturb it less
    while row_id <= messages:
        conn.execute("BEGIN IMMEDIATE")
        for _ in range(16):
            conn.execute("SAVEPOINT op")
            message_store.insert_messages(conn, 1, [(row_id, "id", message)], 1_700_000_000_000, "sender")
            conn.execute("RELEASE op")
            row_id += 1
        conn.execute("COMMIT")
    took = time.process_time() - started
    conn.close()
    return took / messages * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", default="messages_by_queue")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    path = os.path.join(tempfile.mkdtemp(prefix="index-cost-"), "q.db")
    runs: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(args.reps):
        runs["without"].append(per_message_us(path, args.index, args.messages))
        runs["with"].append(per_message_us(path, None, args.messages))
    for name, values in runs.items():
        print(f"{name:>7} {args.index}: {', '.join(f'{v:.2f}' for v in values)} us/message, "
              f"median {statistics.median(values):.2f}")
