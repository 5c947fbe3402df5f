"""FIFO and fair-queue benchmark of queueserver.

Each run starts its own server (`python -m queueserver serve --port 0 --db <tmp>`, pinned
to core 0 with taskset when there are two cores or more) on a fresh temporary database and
reads its READY line. The client runs in this process (pinned to core 1): asyncio with
hand-written HTTP/1.1 keep-alive requests in the AWS JSON protocol, one request at a time
per connection, so the figures are the server's and not boto3's.

Scenarios (every run does all of them; medians of --runs runs are printed):

  standard send      the baseline: SendMessageBatch of 10 to a standard queue, same connections
  standard recv+del  the baseline: ReceiveMessage(10) + DeleteMessageBatch of that queue

  fifo send          SendMessageBatch of 10 on --connections connections for --seconds,
                     messages spread over --groups groups, a unique MessageDeduplicationId each
  fifo recv+del      the queue the send filled is drained: ReceiveMessage(10) +
                     DeleteMessageBatch, on --connections, then 4, then 1 connection(s),
                     2/3 of --seconds each; empty receives are counted
  fifo recv+del, 1g  the same on a queue whose messages are all in one group (only one
                     receive can hold it at a time: the round trip is the limit)
  fair dwell         a standard queue with a noisy group's backlog of --backlog messages;
                     --consumers connections drain it (long-poll ReceiveMessage(10) +
                     DeleteMessageBatch) while a producer sends a quiet group's message every
                     --quiet-interval ms; dwell = from the quiet send's answer to the receive
                     answer that carried it. Also reported: how much noisy backlog was left
                     when the last quiet message arrived (it must still be large, or the
                     figure says nothing about fairness)
  no-group dwell     the same traffic without MessageGroupId (a plain standard queue): the
                     quiet messages wait behind the backlog. The baseline for the ratio
  fifo dwell         the same traffic on a FIFO queue (noisy and quiet are message groups):
                     the claim walks past the noisy group's backlog to reach the quiet one

Usage:
  .venv/bin/python scripts/bench fifo                 # the figures in docs/benchmarks.md ("FIFO queues")
  .venv/bin/python scripts/bench fifo --runs 1 --seconds 1 --backlog 2000   # a quick look
  .venv/bin/python scripts/bench fifo --scaling       # receive cost against backlog and groups
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.client import Client
from bench.servers import start_queueserver


async def create_queue(conn: Client, name: str, attributes: dict[str, str]) -> str:
    return (await conn.call("CreateQueue", {"QueueName": name, "Attributes": attributes}))["QueueUrl"]


def entries(group_of: Any, start: int, fifo: bool, body_pad: str) -> list[dict[str, Any]]:
    batch = []
    for n in range(10):
        entry: dict[str, Any] = {"Id": f"e{n}", "MessageBody": f"{start + n}:{body_pad}"}
        group = group_of(start + n)
        if group is not None:
            entry["MessageGroupId"] = group
        if fifo:
            entry["MessageDeduplicationId"] = uuid.uuid4().hex
        batch.append(entry)
    return batch


async def fill(conns: list[Client], url: str, total: int, group_of: Any, fifo: bool, pad: str) -> None:
    """Send `total` messages in batches of 10 over all connections (untimed set-up)."""
    starts = iter(range(0, total, 10))

    async def worker(conn: Client) -> None:
        for start in starts:
            await conn.call("SendMessageBatch", {"QueueUrl": url, "Entries": entries(group_of, start, fifo, pad)})

    await asyncio.gather(*(worker(c) for c in conns))


# --- scenarios --------------------------------------------------------------------------------


async def send_rate(conns: list[Client], url: str, seconds: float, group_of: Any, fifo: bool,
                    pad: str) -> float:
    deadline = time.perf_counter() + seconds
    sent = 0
    counter = iter(range(0, 1 << 40, 10))

    async def worker(conn: Client) -> None:
        nonlocal sent
        while time.perf_counter() < deadline:
            start = next(counter)
            await conn.call("SendMessageBatch", {"QueueUrl": url, "Entries": entries(group_of, start, fifo, pad)})
            sent += 10

    began = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    return sent / (time.perf_counter() - began)


async def receive_delete_rate(conns: list[Client], url: str, seconds: float) -> tuple[float, int]:
    """msgs/s received and deleted; also how many receives came back empty."""
    deadline = time.perf_counter() + seconds
    done = 0
    empty = 0

    async def worker(conn: Client) -> None:
        nonlocal done, empty
        while time.perf_counter() < deadline:
            got = (await conn.call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10})).get("Messages", [])
            if not got:
                empty += 1
                continue
            resp = await conn.call("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
                {"Id": f"d{n}", "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(got)]})
            assert not resp.get("Failed"), resp["Failed"]
            done += len(got)

    began = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    return done / (time.perf_counter() - began), empty


@dataclass
class Dwell:
    dwell_ms: list[float] = field(default_factory=list)
    backlog_left: int = 0
    drained: int = 0
    drain_seconds: float = 0.0  # until the last noisy message this test received


async def dwell(conns: list[Client], producer: Client, url: str, backlog: int, quiet: int,
                interval_ms: float, noisy_group: str | None, quiet_group: str | None, fifo: bool) -> Dwell:
    """Consumers drain a noisy backlog while a producer sends `quiet` quiet messages."""
    sent_at: dict[str, float] = {}
    received_at: dict[str, float] = {}
    result = Dwell()
    stop = asyncio.Event()
    began = time.perf_counter()

    async def consumer(conn: Client) -> None:
        while not stop.is_set():
            got = (await conn.call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10,
                                                      "WaitTimeSeconds": 1})).get("Messages", [])
            now = time.perf_counter()
            for m in got:
                if m["Body"].startswith("quiet-"):
                    received_at[m["Body"]] = now
                else:
                    result.drained += 1
                    result.drain_seconds = now - began
            if got:
                await conn.call("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
                    {"Id": f"d{n}", "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(got)]})
            if len(received_at) == quiet and len(sent_at) == quiet:
                result.backlog_left = backlog - result.drained
                stop.set()

    async def produce() -> None:
        for n in range(quiet):
            body = f"quiet-{n}"
            payload: dict[str, Any] = {"QueueUrl": url, "MessageBody": body}
            if quiet_group is not None:
                payload["MessageGroupId"] = quiet_group
            if fifo:
                payload["MessageDeduplicationId"] = uuid.uuid4().hex
            await producer.call("SendMessage", payload)
            sent_at[body] = time.perf_counter()
            await asyncio.sleep(interval_ms / 1000)

    await asyncio.gather(produce(), *(consumer(c) for c in conns))
    result.dwell_ms = [(received_at[b] - sent_at[b]) * 1000 for b in sent_at]
    return result


# --- scaling probes (--scaling) ----------------------------------------------------------------


async def latency_ms(conn: Client, action: str, payload: dict[str, Any], n: int = 30) -> float:
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        await conn.call(action, payload)
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


async def scaling(db_dir: Path, pad: str) -> list[tuple[str, float]]:
    """How a receive's cost grows with the backlog of a held FIFO group and with a fair queue's groups."""
    server = start_queueserver(sys.executable, db_dir / "scaling.db", db_dir / "scaling.log")
    admin = Client(server.host, server.port)
    conns = [Client(server.host, server.port) for _ in range(8)]
    rows: list[tuple[str, float]] = []
    try:
        held_50k = ""
        for backlog in (1_000, 10_000, 50_000):
            url = await create_queue(admin, f"held-{backlog}.fifo", {"FifoQueue": "true"})
            await fill(conns, url, backlog, lambda i: "noisy", True, pad)
            await admin.call("ReceiveMessage", {"QueueUrl": url, "VisibilityTimeout": 3600})  # hold the group
            rows.append((f"empty FIFO receive, held group of {backlog:,}: p50 ms",
                         await latency_ms(admin, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10})))
            held_50k = url
        other = await create_queue(admin, "bystander", {})
        send_other = {"QueueUrl": other, "MessageBody": "x"}
        rows.append(("SendMessage to another queue, idle server: p50 ms",
                     await latency_ms(admin, "SendMessage", send_other)))
        stop = asyncio.Event()

        async def poll_held(conn: Client) -> None:
            while not stop.is_set():
                await conn.call("ReceiveMessage", {"QueueUrl": held_50k, "MaxNumberOfMessages": 10})

        pollers = [asyncio.create_task(poll_held(c)) for c in conns[:4]]
        await asyncio.sleep(0.5)
        rows.append(("SendMessage to another queue, 4 clients polling the held 50,000 group: p50 ms",
                     await latency_ms(admin, "SendMessage", send_other)))
        stop.set()
        await asyncio.gather(*pollers)
        for backlog in (1_000, 10_000, 50_000):
            for label, group_of in (("one group", lambda i: "noisy"), ("no groups", lambda i: None)):
                url = await create_queue(admin, f"fair-{backlog}-{label.replace(' ', '-')}", {})
                await fill(conns, url, backlog, group_of, False, pad)
                rows.append((f"standard receive, {backlog:,} messages in {label}: p50 ms", await latency_ms(
                    admin, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 0})))
        for groups in (10, 1_000, 10_000):
            url = await create_queue(admin, f"tenants-{groups}", {})
            await fill(conns, url, 20_000, lambda i, g=groups: f"t{i % g}", False, pad)
            rows.append((f"fair receive, 20,000 messages over {groups:,} groups: p50 ms", await latency_ms(
                admin, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 0}, 10)))
    finally:
        for c in conns + [admin]:
            c.close()
        server.stop()
    return rows


# --- one run -----------------------------------------------------------------------------------


async def one_run(args: argparse.Namespace, db_dir: Path, run: int) -> dict[str, Any]:
    server = start_queueserver(sys.executable, db_dir / f"run{run}.db", db_dir / f"run{run}.log")
    figures: dict[str, Any] = {}
    conns = [Client(server.host, server.port) for _ in range(args.connections)]
    admin = Client(server.host, server.port)
    pad = "x" * args.body_bytes
    try:
        fifo = {"FifoQueue": "true"}
        standard = await create_queue(admin, f"standard-{run}", {})
        figures["standard send msgs/s"] = await send_rate(conns, standard, args.seconds, lambda i: None, False, pad)
        figures["standard recv+del msgs/s"], _ = await receive_delete_rate(conns, standard, args.seconds)

        url = await create_queue(admin, f"send-{run}.fifo", fifo)
        figures["fifo send msgs/s"] = await send_rate(conns, url, args.seconds, lambda i: f"g{i % args.groups}",
                                                      True, pad)
        for n in (args.connections, 4, 1):  # the send left a backlog of many seconds' worth
            rate, empty = await receive_delete_rate(conns[:n], url, args.seconds * 2 / 3)
            figures[f"fifo recv+del {n} conn msgs/s"] = rate
            figures[f"fifo recv+del {n} conn empty receives"] = empty

        one = await create_queue(admin, f"one-group-{run}.fifo", fifo)
        await fill(conns, one, 3000, lambda i: "only", True, pad)
        figures["fifo recv+del 1 group msgs/s"], figures["fifo 1 group empty receives"] = await receive_delete_rate(
            conns, one, args.seconds / 2)

        consumers = conns[:args.consumers]
        for label, attributes, noisy, quiet, is_fifo in (
                ("fair", {}, "noisy", "quiet", False),
                ("no-group", {}, None, None, False),
                ("fifo", fifo, "noisy", "quiet", True)):
            name = f"dwell-{label}-{run}" + (".fifo" if is_fifo else "")
            queue = await create_queue(admin, name, attributes)
            await fill(conns, queue, args.backlog, lambda i, g=noisy: g, is_fifo, pad)
            result = await dwell(consumers, admin, queue, args.backlog, args.quiet, args.quiet_interval,
                                 noisy, quiet, is_fifo)
            figures[f"{label} dwell p50 ms"] = statistics.median(result.dwell_ms)
            figures[f"{label} dwell max ms"] = max(result.dwell_ms)
            figures[f"{label} backlog left"] = result.backlog_left
            figures[f"{label} noisy drained msgs/s"] = result.drained / result.drain_seconds if result.drained else 0.0
    finally:
        for c in conns + [admin]:
            c.close()
        server.stop()
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each throughput phase")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--groups", type=int, default=100, help="message groups of the FIFO send/receive")
    parser.add_argument("--backlog", type=int, default=10_000, help="the noisy group's backlog")
    parser.add_argument("--consumers", type=int, default=8, help="connections draining during the dwell test")
    parser.add_argument("--quiet", type=int, default=50, help="quiet messages per dwell test")
    parser.add_argument("--quiet-interval", type=float, default=10.0, help="ms between quiet sends")
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--json", help="also write the per-run figures here")
    parser.add_argument("--scaling", action="store_true",
                        help="instead: how receive cost grows with a held FIFO group's backlog and a fair queue's groups")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the server has core 0
    try:
        import uvloop
        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    started = time.perf_counter()
    if args.scaling:
        with tempfile.TemporaryDirectory(prefix="fifo-bench-") as tmp:
            for label, value in runner(scaling(Path(tmp), "x" * args.body_bytes)):
                print(f"  {label:84s} {value:>9,.2f}", flush=True)
        print(f"({time.perf_counter() - started:.0f} s)")
        return
    runs = []
    with tempfile.TemporaryDirectory(prefix="fifo-bench-") as tmp:
        for run in range(args.runs):
            figures = runner(one_run(args, Path(tmp), run))
            runs.append(figures)
            print(f"run {run + 1}: " + ", ".join(f"{k} {v:,.1f}" for k, v in figures.items()), flush=True)
    print(f"\nmedians of {args.runs} runs ({time.perf_counter() - started:.0f} s in all; "
          f"{args.connections} connections, {args.groups} groups, backlog {args.backlog:,}, "
          f"{args.consumers} consumers, {args.body_bytes}-byte bodies)")
    for key in runs[0]:
        print(f"  {key:32s} {statistics.median(r[key] for r in runs):>12,.1f}")
    fair = statistics.median(r["fair dwell p50 ms"] for r in runs)
    plain = statistics.median(r["no-group dwell p50 ms"] for r in runs)
    print(f"  {'no-group / fair dwell p50':32s} {plain / fair:>12,.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))
