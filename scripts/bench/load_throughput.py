"""The throughput scenarios of `python scripts/bench load`, and the HTTP ceiling measured with the same client.

send1 and send10 on the backlog queue, recv10+del and recv1+del1 down to it, big bodies and sends
by subscription count on fresh queues beside it (load.py's docstring says what each does).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from bench.client import Api, Conn, SQSError, connect_many, fresh
from bench.load_bench import FAILED_ENTRY, Bench, body_of
from bench.load_measure import Meter, Rep, Tally, make_rep, summarize, wait_quiet
from bench.servers import Proc

# The reference server's expected rates, msgs/s: only to size a receive run's backlog. The
# reference itself (scripts/bench/reference_server.py) is measured in every run, beside queueserver.
SIZING_RATE = {
    "send1": 8_600,
    "send10": 53_000,
    "recv10+del": 29_000,
    "recv1+del1": 3_600,
    "roundtrip10": 16_600,
}
# The big-bodies scenario: body sizes, and msgs/s to size a repetition's fill until one was measured.
BIG_BODIES = {10 * 1024: 10_000, 256 * 1024: 500}
BIG_BATCH_BYTES = 1_048_576  # a send batch's most body bytes


class ThroughputScenarios(Bench):
    """Messages per second through the backlog queue, and through fresh queues beside it."""

    async def scenario_send(self, name: str, batch: bool) -> None:
        req = self.send10_req if batch else self.send1_req
        per = 10 if batch else 1
        perf = time.perf_counter
        backlog = self.backlog

        async def worker(conn: Conn, deadline: float, t: Tally) -> None:
            lat = t.lat
            while perf() < deadline:
                t0 = perf()
                status, body = await conn.request(req)
                lat.append(perf() - t0)
                t.requests += 1
                if status != 200 or (batch and FAILED_ENTRY in body):
                    t.error(f"{status}: {body[:200]!r}")
                    continue
                t.msgs += per
                self.depth += per

        reps = []
        for rep in range(-1, self.args.reps):  # rep -1: warm-up
            await self.drain_to(backlog)
            depth_start = self.depth
            t, m, wall = await self.run_workers(worker, self.args.warmup if rep < 0 else self.args.seconds)
            if rep >= 0:
                reps.append(make_rep(t, m, wall, depth_start, self.depth))
                self._print_rep(name, rep, reps[-1])
        await self.drain_to(backlog)
        self.results[name] = summarize(reps, self.args.quiet)

    async def scenario_fanout(self, name: str) -> None:
        """send10 on a queue with 0, 1 and 4 subscriptions: what a subscription costs a send."""
        perf = time.perf_counter
        counts = (0, 1, 4)
        reps: dict[int, list[Rep]] = {n: [] for n in counts}
        for rep in range(-1, self.args.reps):  # rep -1: warm-up
            for subscriptions in counts[rep % 3:] + counts[:rep % 3]:  # rotating, so that drift spreads evenly
                url = (await self.ctl_call("CreateQueue", {"QueueName": f"fanout{subscriptions}-{rep + 1}"}))["QueueUrl"]
                for i in range(subscriptions):
                    await self.ctl_call("QueueserverCreateSubscription", {"QueueUrl": url, "SubscriptionName": f"s{i}"})
                req = self.api.req("SendMessageBatch", {"QueueUrl": url, "Entries": [
                    {"Id": str(i), "MessageBody": self.body} for i in range(10)]})

                async def worker(conn: Conn, deadline: float, t: Tally, req: bytes = req) -> None:
                    while perf() < deadline:
                        t0 = perf()
                        status, body = await conn.request(req)
                        t.lat.append(perf() - t0)
                        t.requests += 1
                        if status != 200 or FAILED_ENTRY in body:
                            t.error(f"{status}: {body[:200]!r}")
                            continue
                        t.msgs += 10

                t, m, wall = await self.run_workers(worker, self.args.warmup if rep < 0 else self.args.seconds)
                if rep >= 0:
                    reps[subscriptions].append(make_rep(t, m, wall, 0, t.msgs))
                    self._print_rep(f"{name}{subscriptions}", rep, reps[subscriptions][-1])
                await self.ctl_call("DeleteQueue", {"QueueUrl": url})
        self.results[name] = {str(n): summarize(r, self.args.quiet) for n, r in reps.items()}

    async def scenario_receive(self, name: str, n: int) -> None:
        backlog = self.backlog
        estimate = SIZING_RATE[name] * 1.5  # msgs/s; after the warm-up, the last run's rate
        reps = []
        for rep in range(-1, self.args.reps):
            seconds = self.args.warmup if rep < 0 else self.args.seconds
            await self.top_up(backlog + int(estimate * seconds * 1.3) + 2_000)
            depth_start = self.depth
            budget = [self.depth - backlog]

            async def worker(conn: Conn, deadline: float, t: Tally, budget: list[int] = budget) -> None:
                await self._recv_del_loop(conn, deadline, t, budget, n, True)

            t, m, wall = await self.run_workers(worker, seconds)
            result = make_rep(t, m, wall, depth_start, self.depth)
            estimate = result.msgs_per_s
            if rep >= 0:
                reps.append(result)
                self._print_rep(name, rep, result)
                if wall < seconds * 0.8:
                    print(f"      (the backlog budget ran out after {wall:.1f} s; rate still measured)")
        await self.drain_to(backlog)
        self.results[name] = summarize(reps, self.args.quiet)

    async def scenario_big_bodies(self) -> None:
        """recv10+del of big bodies, on a fresh queue per size (the backlog queue stays as it is)."""
        for size, estimate in BIG_BODIES.items():
            name = f"recv10+del {size // 1024}KiB"
            url = (await self.ctl_call("CreateQueue", {"QueueName": f"bench-big-{size}"}))["QueueUrl"]
            per_send = max(1, min(10, BIG_BATCH_BYTES // size - 1))
            send_req = self.api.req("SendMessageBatch", {"QueueUrl": url, "Entries": [
                {"Id": str(i), "MessageBody": body_of(size, str(i))} for i in range(per_send)]})
            recv_req = self.api.req("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10})
            reps = []
            for rep in range(-1, self.args.reps):
                seconds = self.args.warmup if rep < 0 else self.args.seconds
                fill = [int(estimate * seconds * 1.3) + 100]
                budget = [fill[0]]

                async def sender(conn: Conn, deadline: float, t: Tally, fill: list[int] = fill,
                                 per_send: int = per_send, send_req: bytes = send_req) -> None:
                    while fill[0] > 0:
                        fill[0] -= per_send
                        status, body = await conn.request(send_req)
                        if status != 200 or FAILED_ENTRY in body:
                            raise SQSError(f"fill: {status} {body[:300]!r}")

                await self.refresh()
                await asyncio.gather(*(sender(c, 0, Tally()) for c in self.conns))

                async def worker(conn: Conn, deadline: float, t: Tally, budget: list[int] = budget,
                                 recv_req: bytes = recv_req, url: str = url) -> None:
                    perf = time.perf_counter
                    while budget[0] > 0 and perf() < deadline:
                        budget[0] -= 10
                        t0 = perf()
                        status, body = await conn.request(recv_req)
                        t1 = perf()
                        messages = json.loads(body).get("Messages", []) if status == 200 else []
                        if not messages:
                            t.error(f"ReceiveMessage {status}: {body[:200]!r}")
                            continue
                        status, body = await conn.request(self.api.req("DeleteMessageBatch", {
                            "QueueUrl": url, "Entries": [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                         for i, m in enumerate(messages)]}))
                        if status != 200 or FAILED_ENTRY in body:
                            t.error(f"Delete {status}: {body[:200]!r}")
                            continue
                        t.lat += [t1 - t0, perf() - t1]
                        t.requests += 2
                        t.msgs += len(messages)

                t, m, wall = await self.run_workers(worker, seconds)
                result = make_rep(t, m, wall, 0, 0)
                estimate = result.msgs_per_s or estimate
                if rep >= 0:
                    reps.append(result)
                    self._print_rep(name, rep, result)
                await self.ctl_call("PurgeQueue", {"QueueUrl": url})
            await self.ctl_call("DeleteQueue", {"QueueUrl": url})
            self.results[name] = summarize(reps, self.args.quiet)


async def measure_ceiling(args: argparse.Namespace, server: Proc) -> dict[str, Any]:
    """The trivial endpoint, same client, same request bytes as SendMessage."""
    api = Api(server.host, server.port)
    req = api.req("SendMessage", {"QueueUrl": f"http://{server.host}:{server.port}/000000000000/bench",
                                  "MessageBody": body_of(args.body_size)})
    conns = await connect_many(server.host, server.port, args.connections)
    perf = time.perf_counter

    async def worker(conn: Conn, deadline: float, t: Tally) -> None:
        lat = t.lat
        while perf() < deadline:
            t0 = perf()
            status, body = await conn.request(req)
            lat.append(perf() - t0)
            t.requests += 1
            t.msgs += 1
            if status != 200:
                t.error(f"{status}: {body[:200]!r}")

    reps = []
    for rep in range(-1, args.reps):
        await wait_quiet(server, args.quiet, args.quiet_wait)
        conns = [await fresh(c, server.host, server.port) for c in conns]
        tally = Tally()
        deadline = perf() + (args.warmup if rep < 0 else args.seconds)
        with Meter(server) as meter:
            start = perf()
            await asyncio.gather(*(worker(c, deadline, tally) for c in conns))
            wall = perf() - start
        if rep >= 0:
            reps.append(make_rep(tally, meter, wall, 0, 0))
            r = reps[-1]
            print(f"    ceiling      rep {rep + 1}: {r.req_per_s:>9,.0f} req/s p50 {r.p50_ms:6.2f} p99 {r.p99_ms:6.2f} ms"
                  f"  server CPU {r.server_cpu:4.0%} client CPU {r.client_cpu:4.0%} others {r.foreign_cpu:.0%} "
                  f"req/server-CPU-s {r.msgs_per_cpu_s:,.0f}", flush=True)
    for c in conns:
        c.close()
    return summarize(reps, args.quiet)
