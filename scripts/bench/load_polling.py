"""The polling scenarios of `python scripts/bench load`: reads of the backlog queue beside writes, and idle long polls.

reads: sends on a second queue while the backlog queue is polled (GetQueueAttributes) and browsed,
against the same sends without, rep by rep (reads must not stall writes). idle: a thousand long polls
open on an empty queue: the server's CPU while nothing happens, how soon a send reaches a poller, RSS.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable

from bench.client import Conn, SQSError, connect_many, fresh
from bench.load_bench import Bench
from bench.load_measure import (
    Meter,
    Rep,
    Tally,
    make_rep,
    median,
    pct,
    summarize,
    wait_quiet,
)


class PollingScenarios(Bench):
    """What polling costs: reads of the backlog queue beside writes, and long polls waiting on an empty queue."""

    async def scenario_reads(self, name: str) -> None:
        """SendMessage(1) on queue B, with and without A (the backlog queue) being polled and browsed."""
        api, perf = self.api, time.perf_counter
        b_url = (await self.ctl_call("CreateQueue", {"QueueName": "bench-reads-b"}))["QueueUrl"]
        send_req = api.req("SendMessage", {"QueueUrl": b_url, "MessageBody": self.body})
        attrs_req = api.req("GetQueueAttributes", {"QueueUrl": self.queue_url, "AttributeNames": ["All"]})
        first = await self.ctl_call("QueueserverBrowseMessages", {"QueueUrl": self.queue_url, "MaxNumberOfMessages": 1})
        first_position = int(first["NextToken"])
        depth = self.depth
        pollers = await connect_many(self.server.host, self.server.port, 2)
        rng = random.Random(16)

        async def sender(conn: Conn, deadline: float, t: Tally) -> None:
            while perf() < deadline:
                t0 = perf()
                status, body = await conn.request(send_req)
                t.lat.append(perf() - t0)
                t.requests += 1
                if status != 200:
                    t.error(f"SendMessage {status}: {body[:200]!r}")
                    continue
                t.msgs += 1

        async def every(period: float, conn: Conn, deadline: float, t: Tally, action: str,
                        make: Callable[[], bytes], check: Callable[[bytes], bool]) -> None:
            lat = t.lat_by.setdefault(action, [])
            tick = perf()
            while perf() < deadline:
                t0 = perf()
                status, body = await conn.request(make())
                lat.append(perf() - t0)
                if status != 200 or not check(body):
                    t.error(f"{action} {status}: {body[:200]!r}")
                tick += period
                await asyncio.sleep(max(0.0, min(tick, deadline) - perf()))

        def browse_req() -> bytes:
            after = first_position - 1 + rng.randrange(max(1, depth - 1000))
            return api.req("QueueserverBrowseMessages", {
                "QueueUrl": self.queue_url, "MaxNumberOfMessages": 1000, "NextToken": str(after)})

        runs: dict[str, list[Rep]] = {"plain": [], "polled": []}
        samples: dict[str, list[float]] = {"GetQueueAttributes(All)": [], "browse(1000)": []}
        for rep in range(-1, self.args.reps):
            order = ["plain", "polled"] if rep % 2 == 0 else ["polled", "plain"]
            for kind in order:
                await self.ctl_call("PurgeQueue", {"QueueUrl": b_url})
                await wait_quiet(self.server, self.args.quiet, self.args.quiet_wait)
                await self.refresh()
                pollers = list(await asyncio.gather(*(fresh(c, self.server.host, self.server.port) for c in pollers)))
                tally = Tally()
                seconds = self.args.warmup if rep < 0 else self.args.seconds
                deadline = perf() + seconds
                tasks = [sender(c, deadline, tally) for c in self.conns]
                if kind == "polled":
                    tasks.append(every(0.5, pollers[0], deadline, tally, "GetQueueAttributes(All)",
                                       lambda: attrs_req, lambda body: b"ApproximateNumberOfMessages" in body))
                    tasks.append(every(1.0, pollers[1], deadline, tally, "browse(1000)", browse_req,
                                       lambda body: body.count(b'"MessageId"') == 1000))
                with Meter(self.server) as meter:
                    start = perf()
                    await asyncio.gather(*tasks)
                    wall = perf() - start
                if rep >= 0:
                    runs[kind].append(make_rep(tally, meter, wall, self.depth, self.depth))
                    self._print_rep(f"{name}:{kind}", rep, runs[kind][-1])
                    for action, values in tally.lat_by.items():
                        samples[action] += values
        for c in pollers:
            c.close()
        await self.ctl_call("DeleteQueue", {"QueueUrl": b_url})
        plain, polled = summarize(runs["plain"], self.args.quiet), summarize(runs["polled"], self.args.quiet)
        reads = {action: {"n": len(v), "p50_ms": pct(sorted(v), 0.5) * 1e3, "p99_ms": pct(sorted(v), 0.99) * 1e3,
                          "max_ms": max(v, default=float("nan")) * 1e3} for action, v in samples.items()}
        # Paired: each rep's two runs are back to back, so a ratio per rep cancels most of the load that
        # other processes put on a shared machine; the median of those is the figure.
        rep_ratios = [p.msgs_per_s / q.msgs_per_s for p, q in zip(runs["polled"], runs["plain"])]
        cpu_ratios = [p.msgs_per_cpu_s / q.msgs_per_cpu_s for p, q in zip(runs["polled"], runs["plain"])]
        self.results[name] = {
            "plain": plain, "polled": polled, "ratio": median(rep_ratios), "cpu_ratio": median(cpu_ratios),
            "rep_ratios": [round(x, 3) for x in rep_ratios], "reads": reads, "depth_a": depth,
        }
        r = self.results[name]
        print(f"    {name}: SendMessage(1) on B {polled['msgs_per_s']:,.0f} msgs/s with A polled vs "
              f"{plain['msgs_per_s']:,.0f} without (medians); paired ratio {r['ratio']:.3f}x "
              f"(per rep {r['rep_ratios']}), per server-CPU-second {r['cpu_ratio']:.3f}x; "
              + "; ".join(f"{a} on A p50 {v['p50_ms']:.2f} p99 {v['p99_ms']:.2f} max {v['max_ms']:.2f} ms (n={v['n']})"
                          for a, v in reads.items()), flush=True)

    async def scenario_idle_polls(self) -> None:
        """1,000 idle long polls: CPU while idle, time for a send to reach one, RSS."""
        n = self.args.idle_polls
        api = self.api
        url = (await self.ctl_call("CreateQueue", {"QueueName": "bench-idle"}))["QueueUrl"]
        recv_req = api.req("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 1, "WaitTimeSeconds": 20})
        send_req = api.req("SendMessage", {"QueueUrl": url, "MessageBody": self.body})
        started = time.perf_counter()
        conns = await connect_many(self.server.host, self.server.port, n)
        got: list[asyncio.Future] = [asyncio.get_running_loop().create_future()]
        stop = [False]
        issued = [0]
        perf = time.perf_counter

        async def poller(conn: Conn) -> None:
            while not stop[0]:
                fut = conn.request(recv_req)
                issued[0] += 1
                try:
                    status, body = await fut
                except ConnectionError:
                    return
                arrived = perf()
                if status != 200:
                    continue
                messages = json.loads(body).get("Messages")
                if messages:
                    if not got[0].done():
                        got[0].set_result(arrived)
                    await conn.request(api.req("DeleteMessage", {
                        "QueueUrl": url, "ReceiptHandle": messages[0]["ReceiptHandle"]}))

        tasks = [asyncio.ensure_future(poller(c)) for c in conns]
        while issued[0] < n:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # let the server take every poll in
        print(f"    {n} long polls open ({time.perf_counter() - started:.1f} s)", flush=True)
        c0 = self.server.cpu_seconds()
        t0 = perf()
        await asyncio.sleep(3.0)
        idle_cpu = self.server.cpu_seconds() - c0
        idle_wall = perf() - t0
        wakes, wake_cpu = [], []
        for _ in range(5):
            got[0] = asyncio.get_running_loop().create_future()
            c0 = self.server.cpu_seconds()
            t0 = perf()
            self.ctl = await fresh(self.ctl, self.server.host, self.server.port)
            status, body = await self.ctl.request(send_req)
            if status != 200:
                raise SQSError(f"SendMessage {status}: {body[:200]!r}")
            arrived = await asyncio.wait_for(got[0], 10)
            wakes.append((arrived - t0) * 1e3)
            await asyncio.sleep(0.7)
            wake_cpu.append((self.server.cpu_seconds() - c0) * 1e3)
        memory = self.server.memory_mb()
        stop[0] = True
        for c in conns:
            c.close()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.ctl_call("DeleteQueue", {"QueueUrl": url})
        self.results["idle_polls"] = {
            "polls": n, "idle_cpu_ms": idle_cpu * 1e3, "idle_seconds": idle_wall,
            "wake_ms": wakes, "wake_ms_median": median(wakes), "wake_cpu_ms": wake_cpu,
            "depth": self.depth, **memory,
        }
        r = self.results["idle_polls"]
        print(f"    idle: server CPU {r['idle_cpu_ms']:.0f} ms over {idle_wall:.1f} s with {n} open polls; "
              f"send -> poller: median {r['wake_ms_median']:.2f} ms "
              f"({', '.join(f'{w:.2f}' for w in wakes)}); server CPU per wake-up "
              f"{median(wake_cpu):.0f} ms; RSS {r['rss_mb']:.0f} MB (peak {r['peak_rss_mb']:.0f} MB) "
              f"at depth {self.depth:,}", flush=True)
