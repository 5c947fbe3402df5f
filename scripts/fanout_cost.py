#!/usr/bin/env python3
"""What a subscription costs per message sent, against the cost of one narrow row (issue 22).

The target: "a subscription adds at most the cost of one narrow row per message". Two measurements,
in-process on a temp file, CPU time (time.process_time: less disturbed by a shared machine than wall
time), the configurations interleaved rep by rep, min and median over the reps:

1. The database thread alone: the writer's send SQL (message_store.insert_messages without
   subscriptions, subscriptions.insert_fanned_out with them), SendMessageBatch-sized operations of
   10 messages, 16 operations per transaction each in its own savepoint as database.py runs them,
   into a fresh file per run. Also `bodies alone` (message_store.insert_bodies): the same sends
   without their messages rows, so that (0 subscriptions) - (bodies alone) is what one narrow row
   costs, CPU and bytes. Bytes: page_count x page_size after a TRUNCATE checkpoint, per message.
2. The engine (QueueEngine, the layer under HTTP): 16 concurrent SendMessageBatch(10) of the same
   queue with 0, 1 and 4 subscriptions; everything the server does for a send but HTTP and
   parsing. fsync is off (it is waiting, not CPU, and the same for every configuration).

Usage: .venv/bin/python scripts/fanout_cost.py [--messages 40000] [--reps 5] [--body-size 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from typing import Callable

from queueserver.clock import ManualClock
from queueserver.models import NewMessage
from queueserver.protocol import queue_attributes
from queueserver.storage import QueueEngine, message_store, queue_store, subscriptions
from queueserver.storage.migrations import migrate
from queueserver.storage.sqlite_file import connect

BATCH = 10  # SendMessageBatch
GROUP = 16  # operations per transaction, as the writer groups concurrent sends
NOW_MS = 1_700_000_000_000
SUBSCRIPTION_COUNTS = (0, 1, 4)
CONFIGS = {  # the database thread's configurations: kind and how many receivers beyond the queue
    "bodies0": "bodies alone (the sends without their messages rows)",
    "subscriptions0": "0 subscriptions",
    "subscriptions1": "1 subscription",
    "subscriptions4": "4 subscriptions",
    "rows1": "the queue's send + 1 narrow row per message, in 1 queue",
    "rows4": "the queue's send + 4 narrow rows per message, in 4 queues",
    "copies1": "a copy per receiver, body and all (SNS-style), 1 queue",
    "copies4": "a copy per receiver, body and all (SNS-style), 4 queues",
}


def _fresh(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def database_thread(path: str, config: str, messages: int, body: str) -> tuple[float, float]:
    """(CPU µs, database bytes) per message sent in one configuration (CONFIGS)."""
    _fresh(path)
    conn = connect(path)
    migrate(conn)
    kind, count = config[:-1], int(config[-1])
    conn.execute("BEGIN IMMEDIATE")
    queue_id = queue_store.insert(conn, "r", "a", "q", False, {}, {}, NOW_MS).id
    other_ids = [queue_store.insert(conn, "r", "a", f"q~s{i}", False, {}, {}, NOW_MS).id for i in range(count)]
    conn.execute("COMMIT")
    message = NewMessage(body=body, md5_of_body="m", delay_seconds=0)
    next_row_id = 1

    def more_rows(rows: list[tuple[int, str, NewMessage]]) -> list[tuple[int, str, NewMessage]]:
        nonlocal next_row_id
        next_row_id += len(rows)
        return [(next_row_id - len(rows) + i, message_id, m) for i, (_, message_id, m) in enumerate(rows)]

    def send(rows: list[tuple[int, str, NewMessage]]) -> None:
        nonlocal next_row_id
        if kind == "bodies":
            message_store.insert_bodies(conn, rows, NOW_MS, "sender")
        elif kind == "subscriptions" and other_ids:  # the deliveries as Subscriptions._fan_out lists them
            deliveries = []
            for subscriber_id in other_ids:
                for row_id, _, _ in rows:
                    deliveries.append((next_row_id, subscriber_id, row_id))
                    next_row_id += 1
            subscriptions.insert_fanned_out(conn, queue_id, rows, deliveries, NOW_MS, "sender")
        else:
            message_store.insert_messages(conn, queue_id, rows, NOW_MS, "sender")
            for other_id in other_ids:
                if kind == "copies":  # a copy per receiver, body and all, as SNS fan-out into queues does
                    message_store.insert_messages(conn, other_id, more_rows(rows), NOW_MS, "sender")
                else:  # narrow rows alone: the writer's own INSERT, the body already stored
                    extra = more_rows(rows)
                    conn.execute(message_store._INSERT_MESSAGES + message_store.rows_of(
                        message_store._MESSAGE_ROW, len(extra)), [value for row_id, _, m in extra for value in (
                            row_id, other_id, NOW_MS + m.delay_seconds * 1000, NOW_MS, m.group_id or "")])

    sent = 0
    started = time.process_time()
    while sent < messages:
        conn.execute("BEGIN IMMEDIATE")
        for _ in range(GROUP):
            conn.execute("SAVEPOINT op")
            send(more_rows([(0, "0123456789abcdef0123456789abcdef0123", message)] * BATCH))
            conn.execute("RELEASE op")
            sent += BATCH
        conn.execute("COMMIT")
    took = time.process_time() - started
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    return took / sent * 1e6, size / sent


def engine(path: str, subscription_count: int, messages: int, body: str) -> float:
    """CPU µs per message of QueueEngine.send_messages, 16 concurrent batches of 10."""
    _fresh(path)

    async def main() -> float:
        engine = await QueueEngine.open(path, ManualClock(start_ms=NOW_MS), sync_log=lambda fd: None)
        try:
            queue = await engine.create_queue("us-east-1", "000000000000", "q", fifo=False,
                                              attributes=queue_attributes.DEFAULTS, supplied={}, tags={})
            for i in range(subscription_count):
                await engine.create_subscription(queue, f"s{i}", start_from_all=False)
            batch = [NewMessage(body=body, md5_of_body="m", delay_seconds=0, size=len(body))] * BATCH

            async def sender(count: int) -> None:
                for _ in range(count):
                    await engine.send_messages(queue, batch, sender_id="sender")

            per_sender = messages // BATCH // GROUP
            started = time.process_time()
            await asyncio.gather(*(sender(per_sender) for _ in range(GROUP)))
            return (time.process_time() - started) / (per_sender * GROUP * BATCH) * 1e6
        finally:
            await engine.close()

    return asyncio.run(main())


def interleaved(reps: int, configs: list[str], measure: Callable[[str], tuple[float, ...]]) -> dict[str, list]:
    """Each rep runs every config once, the order rotating, so that drift hits all alike."""
    results: dict[str, list] = {c: [] for c in configs}
    for rep in range(reps):
        for config in configs[rep % len(configs):] + configs[:rep % len(configs)]:
            results[config].append(measure(config))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--body-size", type=int, default=100)
    args = parser.parse_args()
    path = os.path.join(tempfile.mkdtemp(prefix="fanout-cost-"), "q.db")
    body = "x" * args.body_size

    db = interleaved(args.reps, list(CONFIGS), lambda c: database_thread(path, c, args.messages, body))
    cpu = {c: (min(r[0] for r in runs), statistics.median(r[0] for r in runs)) for c, runs in db.items()}
    size = {c: statistics.median(r[1] for r in runs) for c, runs in db.items()}
    print(f"1. database thread: {args.messages:,} messages of {args.body_size} bytes, batches of {BATCH}, "
          f"{GROUP} per transaction, {args.reps} reps")
    print(f"   {'':<58} CPU µs/msg min  median  bytes/msg")
    for config, label in CONFIGS.items():
        print(f"   {label:<58} {cpu[config][0]:>14.2f} {cpu[config][1]:>7.2f} {size[config]:>10.1f}")
    print("   per receiver beyond the queue, per message (CPU min, median; bytes):")
    for n in SUBSCRIPTION_COUNTS[1:]:
        for kind in ("subscriptions", "rows", "copies"):
            extra = [(cpu[f"{kind}{n}"][i] - cpu["subscriptions0"][i]) / n for i in (0, 1)]
            extra_bytes = (size[f"{kind}{n}"] - size["subscriptions0"]) / n
            print(f"   {n} x {kind:<14} {extra[0]:>6.2f} {extra[1]:>6.2f} µs {extra_bytes:>7.1f} bytes")
        ratio = [(cpu[f"subscriptions{n}"][i] - cpu["subscriptions0"][i]) / (cpu[f"rows{n}"][i] - cpu["subscriptions0"][i])
                 for i in (0, 1)]
        ratio_bytes = (size[f"subscriptions{n}"] - size["subscriptions0"]) / (size[f"rows{n}"] - size["subscriptions0"])
        print(f"   {n} subscription(s) / {n} narrow row(s): CPU {ratio[0]:.2f} (min), {ratio[1]:.2f} (median); "
              f"bytes {ratio_bytes:.2f}")
    tail = [cpu["subscriptions0"][i] - cpu["bodies0"][i] for i in (0, 1)]
    print(f"   (a narrow row appended to the same queue's tail, 0 subscriptions - bodies alone: {tail[0]:.2f} µs min, "
          f"{tail[1]:.2f} median, {size['subscriptions0'] - size['bodies0']:.1f} bytes)")

    counts = [str(n) for n in SUBSCRIPTION_COUNTS]
    runs = interleaved(args.reps, counts, lambda c: (engine(path, int(c), args.messages, body),))
    print(f"2. engine (QueueEngine.send_messages, {GROUP} concurrent SendMessageBatch({BATCH})), CPU µs/msg")
    for config in counts:
        values = [r[0] for r in runs[config]]
        extra = "" if config == "0" else (
            f"   +{(min(values) - min(r[0] for r in runs['0'])) / int(config):.2f} µs per subscription (min), "
            f"+{(statistics.median(values) - statistics.median(r[0] for r in runs['0'])) / int(config):.2f} (median)")
        print(f"   {config} subscriptions: min {min(values):.2f}, median {statistics.median(values):.2f}{extra}")


if __name__ == "__main__":
    main()
