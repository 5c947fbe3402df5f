"""What a subscription costs per message sent, against the cost of one narrow row, and at scale.

The target: "a subscription adds at most the cost of one narrow row per message", and a send whose
cost grows with its subscriptions by a small constant. Three measurements:

1. The database thread alone, in-process on a temp file, CPU time (time.process_time: less
   disturbed by a shared machine than wall time), the configurations interleaved rep by rep, min
   and median over the reps: the writer's send SQL (message_store.insert_messages without
   subscriptions, subscriptions.insert_fanned_out with them, and each subscription taking its
   deliveries in the same transaction, as a subscription that keeps up with its queue does),
   SendMessageBatch-sized operations of 10 messages, 16 operations per transaction each in its own
   savepoint as database.py runs them, into a fresh file per run. Also `bodies alone`
   (message_store.insert_bodies): the same sends without their messages rows, so that
   (0 subscriptions) - (bodies alone) is what one narrow row costs, CPU and bytes. Bytes:
   page_count x page_size after a TRUNCATE checkpoint, per message.
2. The engine (QueueEngine, the layer under HTTP): 16 concurrent SendMessageBatch(10) of the same
   queue with 0, 1 and 4 subscriptions; everything the server does for a send but HTTP and
   parsing (the deliveries are taken later, by the subscriptions' receives). fsync is off (it is
   waiting, not CPU, and the same for every configuration).
3. At scale, a real server over HTTP (`--scale`, e.g. 0,100,1000,5000 subscriptions; the server
   pinned to core 0, this client on core 1, `--max-subscriptions` raised to fit): one client sends
   SendMessageBatch(10) one after the other; per count, the median and 90th percentile of a
   batch's round trip (wall time, fsync included) and the server's CPU per batch (/proc), and
   what the server's CPU per batch adds per subscription. Then `--receivers` subscriptions (at
   most) each receive once, which takes all that was sent to them: the server's CPU per delivery
   taken, the part of the fan-out that moved from the send to the receive.

Usage: .venv/bin/python scripts/bench fanout [--messages 40000] [--reps 5] [--body-size 100]
           [--scale 0,100,1000,5000] [--batches 200] [--receivers 100] [--only db,engine,scale]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench import servers

from queueserver.clock import ManualClock
from queueserver.extensions import CREATE_SUBSCRIPTION_ACTION
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
    if kind == "subscriptions":
        for other_id in other_ids:
            subscriptions.add(conn, other_id, queue_id)
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
        elif kind == "subscriptions" and other_ids:  # logged once, as Sending.send does
            subscriptions.insert_fanned_out(conn, queue_id, rows, 1 + len(other_ids), NOW_MS, "sender")
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
        if kind == "subscriptions":  # each takes the group's deliveries, as its receive would
            for other_id in other_ids:
                next_row_id += subscriptions.deliver(conn, other_id, next_row_id)
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


class _Client:
    """One keep-alive HTTP connection speaking AWS JSON 1.0 (the calls here are few; their cost is the server's)."""

    def __init__(self, server: servers.Proc) -> None:
        self._conn = http.client.HTTPConnection(server.host, server.port, timeout=120)

    def call(self, action: str, members: dict[str, Any]) -> dict[str, Any]:
        self._conn.request("POST", "/", json.dumps(members), {
            "X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"})
        response = self._conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{action}: {response.status} {body[:300]!r}")
        return dict(json.loads(body))


def at_scale(subscription_counts: list[int], batches: int, receivers: int, body: str) -> None:
    """Part 3: a real server per count of subscriptions (see the module's docstring)."""
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the server has core 0
    entries = [{"Id": str(i), "MessageBody": body} for i in range(BATCH)]
    warmup = max(1, batches // 10)
    print(f"3. a real server over HTTP: {batches} SendMessageBatch({BATCH}) one after the other per count, "
          f"then up to {receivers} subscriptions each take theirs with one ReceiveMessage")
    print(f"   {'subscriptions':>13} {'batch p50 ms':>13} {'p90 ms':>7} {'server CPU ms/batch':>20} "
          f"{'+ µs/subscription':>18} {'CPU µs/delivery taken':>22}")
    base_cpu: float | None = None
    for count in subscription_counts:
        folder = Path(tempfile.mkdtemp(prefix="fanout-scale-"))
        server = servers.start_proc([sys.executable, "-m", "queueserver", "serve", "--port", "0", "--db",
                                      str(folder / "q.db"), "--log-level", "warning",
                                      "--max-subscriptions", str(max(count, 1))],
                                     folder / "server.log", "queueserver")
        try:
            client = _Client(server)
            queue_url = client.call("CreateQueue", {"QueueName": "fanout"})["QueueUrl"]
            urls = [client.call(CREATE_SUBSCRIPTION_ACTION, {"QueueUrl": queue_url, "SubscriptionName": f"s{i}"})[
                "SubscriptionUrl"] for i in range(count)]
            for _ in range(warmup):
                client.call("SendMessageBatch", {"QueueUrl": queue_url, "Entries": entries})
            round_trips = []
            cpu_before = server.cpu_seconds()
            for _ in range(batches):
                started = time.perf_counter()
                client.call("SendMessageBatch", {"QueueUrl": queue_url, "Entries": entries})
                round_trips.append((time.perf_counter() - started) * 1e3)
            cpu_per_batch = (server.cpu_seconds() - cpu_before) / batches * 1e3
            delivered = ""
            if urls and receivers:
                cpu_before = server.cpu_seconds()
                for url in urls[:receivers]:
                    client.call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": BATCH})
                taken = min(receivers, count) * (warmup + batches) * BATCH
                delivered = f"{(server.cpu_seconds() - cpu_before) / taken * 1e6:.2f}"
        finally:
            server.stop()
        if count == 0:
            base_cpu = cpu_per_batch
        per_subscription = "" if not count or base_cpu is None else f"{(cpu_per_batch - base_cpu) / count * 1e3:.2f}"
        deciles = statistics.quantiles(round_trips, n=10)
        print(f"   {count:>13,} {statistics.median(round_trips):>13.2f} {deciles[8]:>7.2f} {cpu_per_batch:>20.2f} "
              f"{per_subscription:>18} {delivered:>22}")


def interleaved(reps: int, configs: list[str], measure: Callable[[str], tuple[float, ...]]) -> dict[str, list]:
    """Each rep runs every config once, the order rotating, so that drift hits all alike."""
    results: dict[str, list] = {c: [] for c in configs}
    for rep in range(reps):
        for config in configs[rep % len(configs):] + configs[:rep % len(configs)]:
            results[config].append(measure(config))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--scale", default="0,100,1000,5000", help="subscription counts of part 3")
    parser.add_argument("--batches", type=int, default=200, help="timed SendMessageBatch calls per count (part 3)")
    parser.add_argument("--receivers", type=int, default=100, help="subscriptions that receive (part 3)")
    parser.add_argument("--only", default="db,engine,scale", help="the parts to run")
    args = parser.parse_args(argv)
    path = os.path.join(tempfile.mkdtemp(prefix="fanout-cost-"), "q.db")
    body = "x" * args.body_size
    parts = set(args.only.split(","))
    if "db" in parts:
        database_part(path, args.messages, args.reps, body)
    if "engine" in parts:
        engine_part(path, args.messages, args.reps, body)
    if "scale" in parts:
        at_scale([int(n) for n in args.scale.split(",")], args.batches, args.receivers, body)


def database_part(path: str, messages: int, reps: int, body: str) -> None:
    """Part 1 (see the module's docstring)."""

    db = interleaved(reps, list(CONFIGS), lambda c: database_thread(path, c, messages, body))
    cpu = {c: (min(r[0] for r in runs), statistics.median(r[0] for r in runs)) for c, runs in db.items()}
    size = {c: statistics.median(r[1] for r in runs) for c, runs in db.items()}
    print(f"1. database thread: {messages:,} messages of {len(body)} bytes, batches of {BATCH}, "
          f"{GROUP} per transaction, {reps} reps")
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


def engine_part(path: str, messages: int, reps: int, body: str) -> None:
    """Part 2 (see the module's docstring)."""
    counts = [str(n) for n in SUBSCRIPTION_COUNTS]
    runs = interleaved(reps, counts, lambda c: (engine(path, int(c), messages, body),))
    print(f"2. engine (QueueEngine.send_messages, {GROUP} concurrent SendMessageBatch({BATCH})), CPU µs/msg")
    for config in counts:
        values = [r[0] for r in runs[config]]
        extra = "" if config == "0" else (
            f"   +{(min(values) - min(r[0] for r in runs['0'])) / int(config):.2f} µs per subscription (min), "
            f"+{(statistics.median(values) - statistics.median(r[0] for r in runs['0'])) / int(config):.2f} (median)")
        print(f"   {config} subscriptions: min {min(values):.2f}, median {statistics.median(values):.2f}{extra}")
