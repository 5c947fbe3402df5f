"""One server under `python scripts/bench load`: the base of every scenario.

`Bench` holds the client's connections to the server, the backlog queue (kept at its depth between
repetitions: `top_up`, `drain_to`), and runs a repetition's workers under a `Meter`. The scenarios are
its subclasses, by what they measure (load_throughput.py, load_latency.py, load_polling.py); load.py
runs those asked for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.client import Api, Conn, SQSError, call, connect, connect_many, fresh
from bench.load_measure import Meter, Rep, Tally, wait_quiet
from bench.servers import Proc

# A batch answer with a failed entry (one where every entry succeeded has no Failed list, or an empty one).
FAILED_ENTRY = b'"Failed":[{'


def body_of(size: int, tag: str = "") -> str:
    base = f"{tag}|" if tag else ""
    return (base + "x" * size)[:size]


class Bench:
    """A server's connections, its backlog queue and the results of the scenarios run on it."""

    def __init__(self, args: argparse.Namespace, server: Proc, label: str) -> None:
        self.args = args
        self.server = server
        self.label = label
        self.api = Api(server.host, server.port)
        self.conns: list[Conn] = []
        self.depth = 0
        self.backlog = 0  # the backlog queue's depth between repetitions (set by `run`)
        self.queue_url = ""
        self.results: dict[str, Any] = {}
        self.body = body_of(args.body_size)

    # -- helpers --

    async def setup(self) -> None:
        self.conns = await connect_many(self.server.host, self.server.port, self.args.connections)
        self.ctl = await connect(self.server.host, self.server.port)
        self.queue_url = (await self.ctl_call("CreateQueue", {"QueueName": "bench"}))["QueueUrl"]
        self.send1_req = self.api.req("SendMessage", {"QueueUrl": self.queue_url, "MessageBody": self.body})
        self.send10_req = self.api.req("SendMessageBatch", {"QueueUrl": self.queue_url, "Entries": [
            {"Id": str(i), "MessageBody": self.body} for i in range(10)]})
        self.recv10_req = self.api.req("ReceiveMessage", {"QueueUrl": self.queue_url, "MaxNumberOfMessages": 10})
        self.recv1_req = self.api.req("ReceiveMessage", {"QueueUrl": self.queue_url, "MaxNumberOfMessages": 1})

    async def close(self) -> None:
        for c in self.conns + [self.ctl]:
            c.close()

    async def refresh(self) -> None:
        """Replace connections that uvicorn closed (or is about to close) after 5 s idle."""
        host, port = self.server.host, self.server.port
        self.conns = list(await asyncio.gather(*(fresh(c, host, port) for c in self.conns)))
        self.ctl = await fresh(self.ctl, host, port)

    async def ctl_call(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.ctl = await fresh(self.ctl, self.server.host, self.server.port)
        return await call(self.ctl, self.api, action, payload)

    async def server_depth(self) -> int:
        attrs = (await self.ctl_call("GetQueueAttributes", {
            "QueueUrl": self.queue_url, "AttributeNames": ["All"]}))["Attributes"]
        return sum(int(attrs[k]) for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                                           "ApproximateNumberOfMessagesDelayed"))

    async def run_workers(self, worker: Callable[[Conn, float, Tally], Awaitable[None]], seconds: float,
                          conns: list[Conn] | None = None) -> tuple[Tally, Meter, float]:
        await wait_quiet(self.server, self.args.quiet, self.args.quiet_wait)
        await self.refresh()
        tally = Tally()
        deadline = time.perf_counter() + seconds
        with Meter(self.server) as meter:
            start = time.perf_counter()
            await asyncio.gather(*(worker(c, deadline, tally) for c in (conns or self.conns)))
            wall = time.perf_counter() - start
        return tally, meter, wall

    # -- backlog management --

    async def top_up(self, target: int, progress: bool = False) -> None:
        """Send batches of 10 until the queue holds at least `target` messages."""
        if self.depth >= target:
            return
        await self.refresh()
        need = [target - self.depth]
        started = time.perf_counter()
        next_report = [100_000]
        sent_total = [0]

        async def worker(conn: Conn, deadline: float, t: Tally) -> None:
            while need[0] > 0:
                need[0] -= 10
                status, body = await conn.request(self.send10_req)
                if status != 200 or FAILED_ENTRY in body:
                    raise SQSError(f"fill: {status} {body[:300]!r}")
                self.depth += 10
                sent_total[0] += 10
                if progress and sent_total[0] >= next_report[0]:
                    next_report[0] += 100_000
                    rate = sent_total[0] / (time.perf_counter() - started)
                    print(f"    fill: {self.depth:,} messages queued ({rate:,.0f} msgs/s)", flush=True)

        await asyncio.gather(*(worker(c, 0, Tally()) for c in self.conns))
        if progress:
            took = time.perf_counter() - started
            print(f"    fill: {self.depth:,} messages queued in {took:.1f} s "
                  f"({sent_total[0] / took:,.0f} msgs/s)", flush=True)

    async def drain_to(self, target: int) -> None:
        """Receive + delete batches until the queue holds about `target` messages."""
        if self.depth <= target:
            return
        if self.depth - target > max(target, 50_000):
            # Cheaper to start over: purge and fill again.
            await self.ctl_call("PurgeQueue", {"QueueUrl": self.queue_url})
            self.depth = 0
            await self.top_up(target)
            return
        await self.refresh()
        t = Tally()
        budget = [self.depth - target]
        await asyncio.gather(*(self._recv_del_loop(c, float("inf"), t, budget, 10, False) for c in self.conns))
        if t.errors:
            raise SQSError(f"drain: {t.first_error}")

    async def _recv_del_loop(self, conn: Conn, deadline: float, t: Tally, budget: list[int], n: int,
                             record: bool) -> None:
        """Receive n + delete (batch for 10, single for 1) until the deadline or the budget is used."""
        recv_req = self.recv10_req if n == 10 else self.recv1_req
        api, url = self.api, self.queue_url
        lat, lat_recv, lat_del = t.lat, t.lat_by.setdefault("receive", []), t.lat_by.setdefault("delete", [])
        perf = time.perf_counter
        while budget[0] > 0 and perf() < deadline:
            budget[0] -= n
            t0 = perf()
            status, body = await conn.request(recv_req)
            t1 = perf()
            if status != 200:
                t.error(f"ReceiveMessage {status}: {body[:200]!r}")
                continue
            messages = json.loads(body).get("Messages", [])
            if not messages:
                budget[0] += n
                t.error("ReceiveMessage returned no message although the backlog was there")
                await asyncio.sleep(0.01)
                continue
            if n == 1:
                req = api.req("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": messages[0]["ReceiptHandle"]})
            else:
                req = api.req("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]})
            status, body = await conn.request(req)
            t2 = perf()
            if status != 200 or (n != 1 and FAILED_ENTRY in body):
                t.error(f"Delete {status}: {body[:200]!r}")
                continue
            self.depth -= len(messages)
            if record:
                lat.append(t1 - t0)
                lat.append(t2 - t1)
                lat_recv.append(t1 - t0)
                lat_del.append(t2 - t1)
                t.requests += 2
                t.msgs += len(messages)

    def _print_rep(self, name: str, rep: int, r: Rep) -> None:
        extra = f" e2e p50 {r.e2e_p50_ms:.2f} p99 {r.e2e_p99_ms:.2f} ms" if r.e2e_p50_ms == r.e2e_p50_ms else ""
        errors = f" ERRORS {r.errors}: {r.first_error}" if r.errors else ""
        print(f"    {name:<12} rep {rep + 1}: {r.msgs_per_s:>9,.0f} msgs/s {r.req_per_s:>7,.0f} req/s "
              f"p50 {r.p50_ms:6.2f} p99 {r.p99_ms:6.2f} ms{extra}  server CPU {r.server_cpu:4.0%} "
              f"(loop {r.loop_cpu:.0%} + other threads {r.other_cpu:.0%}) client CPU {r.client_cpu:4.0%} "
              f"depth {r.depth_start:,}->{r.depth_end:,} others {r.foreign_cpu:.0%} "
              f"msgs/server-CPU-s {r.msgs_per_cpu_s:,.0f}{errors}", flush=True)
