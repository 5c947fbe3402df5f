"""The end-to-end latency scenarios of `python scripts/bench load`: from a send issued to its receive answered.

roundtrip10 (senders flow-controlled to a window of queued messages, receivers long-polling) and
light (one send every 10 ms, four long-polling receivers), each on a fresh queue of its own; every
body carries the time it was sent.
"""

from __future__ import annotations

import asyncio
import json
import time

from bench.client import Conn
from bench.load_bench import FAILED_ENTRY, Bench
from bench.load_measure import Meter, Tally, make_rep, summarize, wait_quiet


class LatencyScenarios(Bench):
    """End-to-end latency, a timestamp in every body: at full speed (round trips) and at light load."""

    async def scenario_roundtrip(self, name: str) -> None:
        """Senders send batches of 10 with a timestamp in each body; receivers long-poll and delete."""
        args = self.args
        reps = []
        for rep in range(-1, args.reps):
            seconds = args.warmup if rep < 0 else args.seconds
            url = (await self.ctl_call("CreateQueue", {"QueueName": f"bench-rt-{rep + 1}"}))["QueueUrl"]
            t, m, wall = await self._roundtrip(url, seconds, args.rt_senders, args.rt_window)
            await self.ctl_call("DeleteQueue", {"QueueUrl": url})
            if rep >= 0:
                reps.append(make_rep(t, m, wall, self.depth, self.depth))
                self._print_rep(name, rep, reps[-1])
        self.results[name] = summarize(reps, self.args.quiet)

    async def _roundtrip(self, url: str, seconds: float, senders: int, window: int) -> tuple[Tally, Meter, float]:
        api = self.api
        perf = time.perf_counter
        queued = [0]                       # sent, not yet received
        space = asyncio.Event()
        space.set()
        pad = self.args.body_size
        recv_req = api.req("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 2})
        await wait_quiet(self.server, self.args.quiet, self.args.quiet_wait)
        await self.refresh()
        send_conns = self.conns[:senders]
        recv_conns = self.conns[senders:]

        async def sender(conn: Conn, deadline: float, t: Tally) -> None:
            lat = t.lat_by.setdefault("send", [])
            while perf() < deadline:
                while queued[0] >= window:
                    space.clear()
                    await space.wait()
                    if perf() >= deadline:
                        return
                queued[0] += 10
                t0 = perf()
                stamp = repr(t0)
                entries = [{"Id": str(i), "MessageBody": (stamp + " " + "x" * pad)[:pad]} for i in range(10)]
                status, body = await conn.request(api.req("SendMessageBatch", {"QueueUrl": url, "Entries": entries}))
                lat.append(perf() - t0)
                t.requests += 1
                if status != 200 or FAILED_ENTRY in body:
                    t.error(f"SendMessageBatch {status}: {body[:200]!r}")

        async def receiver(conn: Conn, deadline: float, t: Tally) -> None:
            lat_recv = t.lat_by.setdefault("receive", [])
            lat_del = t.lat_by.setdefault("delete", [])
            e2e = t.e2e
            while perf() < deadline:
                t0 = perf()
                status, body = await conn.request(recv_req)
                t1 = perf()
                if status != 200:
                    t.error(f"ReceiveMessage {status}: {body[:200]!r}")
                    continue
                messages = json.loads(body).get("Messages") if body != b"{}" else None
                if not messages:
                    continue
                lat_recv.append(t1 - t0)
                for msg in messages:
                    e2e.append(t1 - float(msg["Body"].split(" ", 1)[0]))
                queued[0] -= len(messages)
                if queued[0] < window:
                    space.set()
                status, body = await conn.request(api.req("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]}))
                t2 = perf()
                lat_del.append(t2 - t1)
                t.requests += 2
                if status != 200 or FAILED_ENTRY in body:
                    t.error(f"DeleteMessageBatch {status}: {body[:200]!r}")
                    continue
                if t2 <= deadline:
                    t.msgs += len(messages)

        tally = Tally()
        deadline = perf() + seconds
        with Meter(self.server) as meter:
            start = perf()
            tasks = [sender(c, deadline, tally) for c in send_conns] + [receiver(c, deadline, tally) for c in recv_conns]

            async def release_senders() -> None:
                await asyncio.sleep(max(0.0, deadline - perf()))
                space.set()

            await asyncio.gather(release_senders(), meter.stop_at(deadline), *tasks)
        tally.lat = tally.lat_by.get("send", []) + tally.lat_by.get("receive", []) + tally.lat_by.get("delete", [])
        return tally, meter, deadline - start

    async def scenario_light(self, name: str) -> None:
        """One SendMessage every 10 ms, 4 long-polling receivers: end-to-end latency at light load."""
        args = self.args
        perf = time.perf_counter
        api = self.api
        reps = []
        for rep in range(args.reps):
            url = (await self.ctl_call("CreateQueue", {"QueueName": f"bench-light-{rep}"}))["QueueUrl"]
            recv_req = api.req("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 2})
            pad = args.body_size

            async def sender(conn: Conn, deadline: float, t: Tally, url: str = url, pad: int = pad) -> None:
                lat = t.lat_by.setdefault("send", [])
                tick = perf()
                while perf() < deadline:
                    t0 = perf()
                    status, body = await conn.request(api.req("SendMessage", {
                        "QueueUrl": url, "MessageBody": (repr(t0) + " " + "x" * pad)[:pad]}))
                    lat.append(perf() - t0)
                    t.requests += 1
                    if status != 200:
                        t.error(f"SendMessage {status}: {body[:200]!r}")
                    tick += 0.010
                    await asyncio.sleep(max(0.0, tick - perf()))

            async def receiver(conn: Conn, deadline: float, t: Tally, url: str = url, recv_req: bytes = recv_req) -> None:
                lat_del = t.lat_by.setdefault("delete", [])
                while perf() < deadline:
                    status, body = await conn.request(recv_req)
                    t1 = perf()
                    if status != 200:
                        t.error(f"ReceiveMessage {status}: {body[:200]!r}")
                        continue
                    messages = json.loads(body).get("Messages")
                    if not messages:
                        continue
                    for msg in messages:
                        t.e2e.append(t1 - float(msg["Body"].split(" ", 1)[0]))
                    if t1 <= deadline:
                        t.msgs += len(messages)
                    status, body = await conn.request(api.req("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]}))
                    lat_del.append(perf() - t1)
                    if status != 200:
                        t.error(f"DeleteMessageBatch {status}: {body[:200]!r}")

            await wait_quiet(self.server, args.quiet, args.quiet_wait)
            await self.refresh()
            tally = Tally()
            deadline = perf() + args.seconds
            with Meter(self.server) as meter:
                start = perf()
                await asyncio.gather(sender(self.conns[0], deadline, tally), meter.stop_at(deadline),
                                     *(receiver(c, deadline, tally) for c in self.conns[1:5]))
                wall = deadline - start
            tally.lat = tally.lat_by.get("send", [])
            await self.ctl_call("DeleteQueue", {"QueueUrl": url})
            reps.append(make_rep(tally, meter, wall, self.depth, self.depth))
            self._print_rep(name, rep, reps[-1])
        self.results[name] = summarize(reps, self.args.quiet)
