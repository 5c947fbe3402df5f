"""HTTP benchmark of queueserver.

Starts the server itself (pinned to core 0 with taskset when it exists) on a temporary
database, and a ceiling server (a trivial starlette endpoint on the same uvicorn setup:
httptools, uvloop, no access log) pinned the same way. The client runs in this process,
pinned to core 1: asyncio (uvloop when installed) with hand-written HTTP/1.1 keep-alive
requests on raw connections and a minimal response parser (status + Content-Length), one
request at a time per connection, 16 connections by default.

Scenarios, each `--seconds` long, `--reps` times (medians are printed), for every backlog
size in `--backlog-sizes`:

  send1       SendMessage, 1 message per request
  send10      SendMessageBatch of 10
  recv10+del  ReceiveMessage(MaxNumberOfMessages=10) + DeleteMessageBatch of what came back
  recv1+del1  ReceiveMessage(MaxNumberOfMessages=1) + DeleteMessage
  roundtrip10 senders send batches of 10 (flow-controlled: at most --rt-window messages
              queued), receivers long-poll receive 10 + DeleteMessageBatch; msgs/s counts
              messages deleted; latency is end to end (send issued -> receive answered),
              from a timestamp in the body
  light e2e   one sender, one SendMessage every 10 ms, 4 long-polling receivers: end-to-end
              latency at light load
  reads       SendMessage(1) on a second queue (B) while the scenario queue (A, holding the backlog)
              is polled: GetQueueAttributes(All) twice a second and one QueueserverBrowseMessages
              page of 1,000 at a random depth once a second; against the same sends without the
              polling, rep by rep in alternating order (reads must not stall writes).
              Reports the throughput ratio (target >= 0.95) and the p99 of both reads on A
              (targets 20 ms and 30 ms)
  fanout      SendMessageBatch of 10 on fresh queues with 0, 1 and 4 subscriptions, rep by
              rep in rotating order; reports each one's msgs/s and its ratio to 0 subscriptions
  big         ReceiveMessage(10) + DeleteMessageBatch of 10 KiB and of 256 KiB bodies, each on a
              fresh queue filled (unmeasured, batches of at most 1 MiB) before every repetition
              with what the repetition can take; results "recv10+del 10KiB" and "... 256KiB"
  idle polls  1,000 connections long-polling (WaitTimeSeconds=20) an empty queue: server CPU
              over 3 s of idleness, then 5 sends, time until a poller has the message
              (median), and the server's RSS with the backlog in place

Backlog: the scenario queue holds the backlog (B messages, 100-byte bodies) before every
repetition. A send repetition starts at depth B and adds what it sends (the excess is
drained again before the next one); a receive repetition starts at B + what it is expected
to consume and stops at the deadline or when the depth would go below B. Round trips run
on a fresh queue of their own next to the backlog queue.

Every figure is also printed as a fraction of the ceiling: ceiling requests/s x the
messages each request of the scenario carries (1, 10, 5, 0.5 and 10/3).

Each run also records the server's CPU (event-loop thread and other threads, from
/proc/PID/task), this client's CPU (if it nears 100% of its core the client is the
bottleneck, and the report says so), and the CPU that *other* processes on the machine
used meanwhile ("others", from /proc/stat): on a shared machine a test suite running
beside the benchmark takes the server's core away. Before each run the benchmark waits
(up to --quiet-wait s) for the machine to quiet down; the table shows the median of the
quiet runs too, and msgs per server-CPU-second, which other load disturbs much less.

Usage:
  .venv/bin/python scripts/bench load --quick                  # 10k backlog only, short runs
  .venv/bin/python scripts/bench load                          # 10k and 1M backlogs, 5 s x 3
  .venv/bin/python scripts/bench load --rev HEAD               # the committed server, not the working tree
  .venv/bin/python scripts/bench load --backlog-sizes 10000 --seconds 3 --reps 3 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from bench.servers import REPO_ROOT as REPO
from bench.client import Api, Conn, SQSError, call, connect, connect_many, fresh
from bench.servers import CLK_TCK, Proc, start_ceiling, start_queueserver, start_reference

# A batch answer with a failed entry (one where every entry succeeded has no Failed list, or an empty one).
FAILED_ENTRY = b'"Failed":[{'


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
TARGET_WAKE_MS = 5.0
TARGET_RSS_MB = 200.0
# Messages carried per HTTP request, for the fraction of the ceiling.
MSGS_PER_REQUEST = {
    "send1": 1.0,
    "send10": 10.0,
    "recv10+del": 5.0,      # receive 10 + delete 10: two requests per 10 messages
    "recv1+del1": 0.5,      # receive 1 + delete 1
    "roundtrip10": 10 / 3,  # send 10 + receive 10 + delete 10
}



def start_console_watch(python: str, url: str) -> subprocess.Popen[str]:
    """One console page open and refreshing itself, in chromium on the client's core."""
    watcher = subprocess.Popen([python, str(Path(__file__).with_name("console_watch.py")), url], stdout=subprocess.PIPE,
                               text=True)
    assert watcher.stdout is not None
    if watcher.stdout.readline().strip() != "WATCHING":
        watcher.kill()
        raise RuntimeError("scripts/bench/console_watch.py did not open the console page")
    return watcher


def export_revision(rev: str, dest: Path) -> tuple[Path, str]:
    """A snapshot of the server at a git revision (the working tree may be mid-change), laid
    out so that `python -m queueserver` runs from it: the migrations go inside the package,
    where the editable install maps them."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], check=True,
                            capture_output=True, text=True).stdout.strip()
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    shutil.copytree(dest / "migrations", dest / "queueserver" / "migrations")
    return dest, commit


def working_tree_state() -> str:
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no",
                                "queueserver", "migrations"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "working tree (not a git checkout)"
    return f"working tree at {commit}" + (" with uncommitted server changes" if dirty.strip() else "")


# -- measurement ----------------------------------------------------------------------------

def pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


@dataclass
class Tally:
    """What the workers of one run collect."""
    msgs: int = 0
    requests: int = 0
    errors: int = 0
    first_error: str = ""
    lat: list[float] = field(default_factory=list)        # per HTTP request, seconds
    lat_by: dict[str, list[float]] = field(default_factory=dict)
    e2e: list[float] = field(default_factory=list)        # end to end, seconds

    def error(self, text: str) -> None:
        self.errors += 1
        if not self.first_error:
            self.first_error = text[:300]


@dataclass
class Rep:
    msgs_per_s: float
    req_per_s: float
    p50_ms: float
    p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    server_cpu: float    # fraction of one core
    loop_cpu: float
    other_cpu: float
    client_cpu: float
    foreign_cpu: float  # other processes on the machine, fraction of one core
    msgs_per_cpu_s: float  # messages per second of server CPU: what one whole core would give
    errors: int
    first_error: str
    seconds: float
    depth_start: int
    depth_end: int
    detail: dict[str, tuple[float, float]]  # action -> (p50 ms, p99 ms)


def machine_busy() -> tuple[float, float]:
    """(busy CPU seconds of all cores, stolen seconds) from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / CLK_TCK, steal / CLK_TCK


class Meter:
    """Wall time, server CPU (per thread group), this process's CPU, and what the rest of the
    machine used meanwhile (other processes on this shared machine disturb the figures)."""

    def __init__(self, server: Proc) -> None:
        self.server = server

    def __enter__(self) -> Self:
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()
        self.s0 = self.server.thread_cpu()
        self.m0 = machine_busy()
        self.stopped = False
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.stopped:
            self.stop()

    async def stop_at(self, deadline: float) -> None:
        """Stop measuring at the deadline (long polls may still run on for a moment)."""
        await asyncio.sleep(max(0.0, deadline - time.perf_counter()))
        self.stop()

    def stop(self) -> None:
        self.stopped = True
        self.wall = time.perf_counter() - self.t0
        client = time.process_time() - self.c0
        self.client = client / self.wall
        s1 = self.server.thread_cpu()
        m1 = machine_busy()
        self.loop = (s1["loop"] - self.s0["loop"]) / self.wall
        self.other = (s1["other"] - self.s0["other"]) / self.wall
        server = s1["loop"] + s1["other"] - self.s0["loop"] - self.s0["other"]
        self.foreign = max(0.0, (m1[0] - self.m0[0]) - server - client) / self.wall
        self.steal = (m1[1] - self.m0[1]) / self.wall


async def wait_quiet(server: Proc, threshold: float, max_wait: float) -> None:
    """Wait (up to max_wait s) until the rest of the machine uses under `threshold` of a core:
    this machine is shared, and a test suite running beside the benchmark halves its figures."""
    started = time.perf_counter()
    announced = False
    while True:
        m = Meter(server)
        with m:
            await asyncio.sleep(0.5)
        if m.foreign + m.steal < threshold:
            return
        if time.perf_counter() - started > max_wait:
            print(f"      (other processes still use {m.foreign + m.steal:.0%} of a core; measuring anyway)", flush=True)
            return
        if not announced:
            print(f"      (waiting for the machine to quiet down: other processes use {m.foreign + m.steal:.0%})",
                  flush=True)
            announced = True


def make_rep(t: Tally, m: Meter, wall: float, depth_start: int, depth_end: int) -> Rep:
    lat = sorted(t.lat)
    e2e = sorted(t.e2e)
    detail = {}
    for action, values in t.lat_by.items():
        values.sort()
        detail[action] = (pct(values, 0.5) * 1e3, pct(values, 0.99) * 1e3)
    return Rep(
        msgs_per_s=t.msgs / wall, req_per_s=t.requests / wall,
        p50_ms=pct(lat, 0.5) * 1e3, p99_ms=pct(lat, 0.99) * 1e3,
        e2e_p50_ms=pct(e2e, 0.5) * 1e3, e2e_p99_ms=pct(e2e, 0.99) * 1e3,
        server_cpu=m.loop + m.other, loop_cpu=m.loop, other_cpu=m.other, client_cpu=m.client,
        foreign_cpu=m.foreign + m.steal,
        msgs_per_cpu_s=t.msgs / ((m.loop + m.other) * m.wall) if m.loop + m.other > 0 else float("nan"),
        errors=t.errors, first_error=t.first_error, seconds=wall,
        depth_start=depth_start, depth_end=depth_end, detail=detail,
    )


def median(values: list[float]) -> float:
    values = sorted(v for v in values if not math.isnan(v))
    if not values:
        return float("nan")
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


QUIET = 0.15  # a run is "quiet" when other processes used at most this much of a core (--quiet sets it)


def summarize(reps: list[Rep]) -> dict[str, Any]:
    keys = ["msgs_per_s", "req_per_s", "p50_ms", "p99_ms", "e2e_p50_ms", "e2e_p99_ms", "server_cpu",
            "loop_cpu", "other_cpu", "client_cpu", "foreign_cpu",
            "msgs_per_cpu_s"]
    out: dict[str, Any] = {k: median([getattr(r, k) for r in reps]) for k in keys}
    out["errors"] = sum(r.errors for r in reps)
    out["first_error"] = next((r.first_error for r in reps if r.first_error), "")
    out["depth_range"] = (min(min(r.depth_start, r.depth_end) for r in reps),
                          max(max(r.depth_start, r.depth_end) for r in reps))
    actions = {a for r in reps for a in r.detail}
    out["detail"] = {a: (median([r.detail[a][0] for r in reps if a in r.detail]),
                         median([r.detail[a][1] for r in reps if a in r.detail])) for a in sorted(actions)}
    out["msgs_per_s_all"] = [round(r.msgs_per_s) for r in reps]
    out["others_all"] = [round(r.foreign_cpu, 2) for r in reps]
    quiet = [r for r in reps if r.foreign_cpu <= QUIET]
    out["quiet_runs"] = len(quiet)
    out["quiet_msgs_per_s"] = median([r.msgs_per_s for r in quiet]) if quiet else float("nan")
    return out


# -- the benchmark ------------------------------------------------------------------------

def body_of(size: int, tag: str = "") -> str:
    base = f"{tag}|" if tag else ""
    return (base + "x" * size)[:size]


class Bench:
    def __init__(self, args: argparse.Namespace, server: Proc, label: str) -> None:
        self.args = args
        self.server = server
        self.label = label
        self.api = Api(server.host, server.port)
        self.conns: list[Conn] = []
        self.depth = 0
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

    # -- scenarios --

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
        self.results[name] = summarize(reps)

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
        self.results[name] = {str(n): summarize(r) for n, r in reps.items()}

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
        self.results[name] = summarize(reps)

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

                async def sender(conn: Conn, deadline: float, t: Tally) -> None:
                    while fill[0] > 0:
                        fill[0] -= per_send
                        status, body = await conn.request(send_req)
                        if status != 200 or FAILED_ENTRY in body:
                            raise SQSError(f"fill: {status} {body[:300]!r}")

                await self.refresh()
                await asyncio.gather(*(sender(c, 0, Tally()) for c in self.conns))

                async def worker(conn: Conn, deadline: float, t: Tally, budget: list[int] = budget) -> None:
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
            self.results[name] = summarize(reps)

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
        self.results[name] = summarize(reps)

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
        self.results[name] = summarize(reps)

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
        plain, polled = summarize(runs["plain"]), summarize(runs["polled"])
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

    def _print_rep(self, name: str, rep: int, r: Rep) -> None:
        extra = f" e2e p50 {r.e2e_p50_ms:.2f} p99 {r.e2e_p99_ms:.2f} ms" if r.e2e_p50_ms == r.e2e_p50_ms else ""
        errors = f" ERRORS {r.errors}: {r.first_error}" if r.errors else ""
        print(f"    {name:<12} rep {rep + 1}: {r.msgs_per_s:>9,.0f} msgs/s {r.req_per_s:>7,.0f} req/s "
              f"p50 {r.p50_ms:6.2f} p99 {r.p99_ms:6.2f} ms{extra}  server CPU {r.server_cpu:4.0%} "
              f"(loop {r.loop_cpu:.0%} + other threads {r.other_cpu:.0%}) client CPU {r.client_cpu:4.0%} "
              f"depth {r.depth_start:,}->{r.depth_end:,} others {r.foreign_cpu:.0%} "
              f"msgs/server-CPU-s {r.msgs_per_cpu_s:,.0f}{errors}", flush=True)

    async def run(self, backlog: int) -> dict[str, Any]:
        self.backlog = backlog
        await self.setup()
        print(f"  filling the backlog: {backlog:,} messages of {self.args.body_size} bytes", flush=True)
        await self.top_up(backlog, progress=backlog >= 100_000)
        print(f"  server reports {await self.server_depth():,} messages; RSS {self.server.memory_mb()['rss_mb']:.0f} MB",
              flush=True)
        wanted = self.args.scenarios
        if "send1" in wanted:
            await self.scenario_send("send1", batch=False)
        if "send10" in wanted:
            await self.scenario_send("send10", batch=True)
        if "recv10+del" in wanted:
            await self.scenario_receive("recv10+del", 10)
        if "recv1+del1" in wanted:
            await self.scenario_receive("recv1+del1", 1)
        if "roundtrip10" in wanted:
            await self.scenario_roundtrip("roundtrip10")
        if "light" in wanted:
            await self.scenario_light("light")
        if "reads" in wanted:
            await self.scenario_reads("reads")
        if "fanout" in wanted:
            await self.scenario_fanout("fanout")
        if "big" in wanted:
            await self.scenario_big_bodies()
        await self.drain_to(backlog)
        if "idle" in wanted:
            await self.scenario_idle_polls()
        self.results["server_depth_end"] = await self.server_depth()
        self.results["memory_end"] = self.server.memory_mb()
        await self.close()
        return self.results


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
    return summarize(reps)


# -- report -------------------------------------------------------------------------------

LABELS = {
    "send1": "SendMessage",
    "send10": "SendMessageBatch(10)",
    "recv10+del": "receive(10) + DeleteMessageBatch",
    "recv1+del1": "receive(1) + DeleteMessage",
    "roundtrip10": "round trip batch(10), long poll",
    "light": "light load e2e (100 msgs/s)",
}


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    ceiling = results["ceiling"]
    reference = results.get("reference", {}).get("by_backlog", {})
    lines: list[str] = []
    add = lines.append
    add("")
    add(f"measured at: {results['server_source']} (commit {results['commit']})")
    add(f"HTTP ceiling (queueserver's HTTP stack, raw ASGI, constant answer): {ceiling['req_per_s']:,.0f} req/s, "
        f"p50 {ceiling['p50_ms']:.2f} ms, p99 {ceiling['p99_ms']:.2f} ms, server CPU {ceiling['server_cpu']:.0%}, "
        f"client CPU {ceiling['client_cpu']:.0%}, others {ceiling['foreign_cpu']:.0%}; "
        f"{ceiling['msgs_per_cpu_s']:,.0f} req per server-CPU-second")
    add("")
    columns = [("scenario", 34), ("backlog", 9), ("msgs/s", 8), ("quiet runs", 14), ("p50 ms", 6), ("p99 ms", 7),
               ("of ceiling", 10),
               ("reference", 9), ("vs ref", 6), ("srv CPU", 7), ("client CPU", 10), ("others", 6),
               ("msgs/CPU-s", 10), ("of ceiling/CPU", 14)]
    add("| " + " | ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(columns)) + " |")
    add("|" + "|".join("-" * (w + 2) for _, w in columns) + "|")
    client_bound = []
    for backlog in results["backlogs"]:
        per = results["by_backlog"][str(backlog)]
        for name in ("send1", "send10", "recv10+del", "recv1+del1", "roundtrip10", "light"):
            r = per.get(name)
            if r is None:
                continue
            measured = reference.get(str(backlog), {}).get(name)
            if name == "light":
                ref_p50 = measured["e2e_p50_ms"] if measured else float("nan")
                cells = [LABELS[name], f"{backlog:,}", f"{r['msgs_per_s']:,.0f}", "", f"{r['e2e_p50_ms']:.2f}",
                         f"{r['e2e_p99_ms']:.2f}", "", f"{ref_p50:.2f} ms",
                         f"{ref_p50 / r['e2e_p50_ms']:.2f}x", f"{r['server_cpu']:.0%}",
                         f"{r['client_cpu']:.0%}", f"{r['foreign_cpu']:.0%}", "", ""]
            else:
                ref = measured["msgs_per_s"] if measured else float("nan")
                per_request = MSGS_PER_REQUEST[name]
                p50, p99 = (r["e2e_p50_ms"], r["e2e_p99_ms"]) if name == "roundtrip10" else (r["p50_ms"], r["p99_ms"])
                quiet = (f"{r['quiet_msgs_per_s']:,.0f} ({r['quiet_runs']}/{len(r['msgs_per_s_all'])})"
                         if r["quiet_runs"] else f"- (0/{len(r['msgs_per_s_all'])})")
                cells = [LABELS[name], f"{backlog:,}", f"{r['msgs_per_s']:,.0f}", quiet, f"{p50:.2f}", f"{p99:.2f}",
                         f"{r['msgs_per_s'] / (ceiling['req_per_s'] * per_request):.2f}", f"{ref:,.0f}",
                         f"{r['msgs_per_s'] / ref:.2f}x", f"{r['server_cpu']:.0%}", f"{r['client_cpu']:.0%}",
                         f"{r['foreign_cpu']:.0%}", f"{r['msgs_per_cpu_s']:,.0f}",
                         f"{r['msgs_per_cpu_s'] / (ceiling['msgs_per_cpu_s'] * per_request):.2f}"]
            add("| " + " | ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}"
                                  for i, (c, (_, w)) in enumerate(zip(cells, columns))) + " |")
            if r["client_cpu"] > 0.85:
                client_bound.append(f"{name} at {backlog:,}")
    add("")
    add("reference: scripts/bench/reference_server.py (this design with none of SQS's checks), measured in this run "
        "with the same client (light load: its end-to-end p50).")
    add("p50/p99: per HTTP request; for the round trip and the light load: end to end, send issued -> receive answered.")
    add("of ceiling: msgs/s / (ceiling req/s x messages per request: 1, 10, 5, 0.5, 10/3).")
    add("quiet runs: median msgs/s of the runs during which other processes used <= "
        f"{QUIET:.0%} of a core (how many of the runs that was).")
    add("srv CPU: server process, fraction of its one core; others: CPU that other processes on the machine used "
        "meanwhile (median of the runs; above ~15% the figures are disturbed).")
    add("msgs/CPU-s: messages per second of server CPU time (what the server would do with its core to itself, "
        "if CPU-bound); of ceiling/CPU: the same against the ceiling's requests per CPU-second.")
    if len(results["backlogs"]) > 1:
        small, big = results["backlogs"][0], results["backlogs"][-1]
        add("")
        add(f"backlog {big:,} vs {small:,} (target >= 0.8):")
        for name in ("send1", "send10", "recv10+del", "recv1+del1", "roundtrip10"):
            a = results["by_backlog"][str(small)].get(name)
            b = results["by_backlog"][str(big)].get(name)
            if a and b:
                add(f"  {LABELS[name]:<34} {b['msgs_per_s'] / a['msgs_per_s']:.2f}")
    for backlog in results["backlogs"]:
        per = results["by_backlog"][str(backlog)]
        idle = per.get("idle_polls")
        if idle:
            add("")
            add(f"idle long polls at backlog {backlog:,}: {idle['polls']} open polls, server CPU "
                f"{idle['idle_cpu_ms']:.0f} ms in {idle['idle_seconds']:.1f} s idle (target: none); "
                f"send -> poller median {idle['wake_ms_median']:.2f} ms (target < {TARGET_WAKE_MS:.0f} ms; runs: "
                f"{', '.join(f'{w:.1f}' for w in idle['wake_ms'])}); server CPU per wake-up "
                f"{median(idle['wake_cpu_ms']):.0f} ms; RSS {idle['rss_mb']:.0f} MB "
                f"(target < {TARGET_RSS_MB:.0f} MB), peak RSS {idle['peak_rss_mb']:.0f} MB, depth {idle['depth']:,}")
        details = []
        for name in ("recv10+del", "recv1+del1", "roundtrip10", "light"):
            r = per.get(name)
            if r and r["detail"]:
                parts = ", ".join(f"{a} p50 {v[0]:.2f} / p99 {v[1]:.2f} ms" for a, v in r["detail"].items())
                details.append(f"  {name}: {parts}; server loop thread {r['loop_cpu']:.0%}, other threads "
                               f"{r['other_cpu']:.0%}; depth {r['depth_range'][0]:,}-{r['depth_range'][1]:,}")
        for name in ("send1", "send10"):
            r = per.get(name)
            if r:
                details.append(f"  {name}: server loop thread {r['loop_cpu']:.0%}, other threads {r['other_cpu']:.0%};"
                               f" depth {r['depth_range'][0]:,}-{r['depth_range'][1]:,}; reps {r['msgs_per_s_all']}")
        if details:
            add("")
            add(f"details at backlog {backlog:,}:")
            lines.extend(details)
        reads = per.get("reads")
        if reads:
            add("")
            add(f"reads beside writes at backlog {backlog:,} (queue A holds {reads['depth_a']:,}): SendMessage(1) on "
                f"queue B {reads['polled']['msgs_per_s']:,.0f} msgs/s while A is polled and browsed vs "
                f"{reads['plain']['msgs_per_s']:,.0f} without (medians); median of the paired per-rep ratios "
                f"{reads['ratio']:.3f}x (target >= 0.95; per rep {reads['rep_ratios']}), msgs per server-CPU-second "
                f"{reads['cpu_ratio']:.3f}x; others {reads['plain']['foreign_cpu']:.0%} / "
                f"{reads['polled']['foreign_cpu']:.0%} of a core")
            for action, v in reads["reads"].items():
                target = 20 if action.startswith("GetQueueAttributes") else 30
                add(f"  {action} on A: p50 {v['p50_ms']:.2f} ms, p99 {v['p99_ms']:.2f} ms (target <= {target} ms), "
                    f"max {v['max_ms']:.2f} ms, {v['n']} requests")
            ref_reads = reference.get(str(backlog), {}).get("reads")
            if ref_reads:
                add(f"  reference: paired ratio {ref_reads['ratio']:.3f}x; " + "; ".join(
                    f"{a} p50 {v['p50_ms']:.2f} / p99 {v['p99_ms']:.2f} ms" for a, v in ref_reads["reads"].items()))
        for size in BIG_BODIES:
            name = f"recv10+del {size // 1024}KiB"
            r, ref = per.get(name), reference.get(str(backlog), {}).get(name)
            if r:
                add("")
                add(f"{name} (fresh queue, medians): {r['msgs_per_s']:,.0f} msgs/s, p50 {r['p50_ms']:.2f} / p99 "
                    f"{r['p99_ms']:.2f} ms, msgs per server-CPU-second {r['msgs_per_cpu_s']:,.0f} (per rep "
                    f"{r['msgs_per_s_all']}); reference "
                    + (f"{ref['msgs_per_s']:,.0f} msgs/s = {r['msgs_per_s'] / ref['msgs_per_s']:.2f}x "
                       f"(per rep {ref['msgs_per_s_all']})" if ref else "not measured"))
        fanout = per.get("fanout")
        if fanout:
            base = fanout["0"]["msgs_per_s"]
            add("")
            add(f"send10 by subscriptions at backlog {backlog:,} (fresh queues, medians): " + "; ".join(
                f"{n}: {r['msgs_per_s']:,.0f} msgs/s = {r['msgs_per_s'] / base:.2f}x, msgs per server-CPU-second "
                f"{r['msgs_per_cpu_s']:,.0f} (per rep {r['msgs_per_s_all']})" for n, r in fanout.items()))
        errors = {name: r["errors"] for name, r in per.items() if isinstance(r, dict) and r.get("errors")}
        if errors:
            add(f"  ERRORS at backlog {backlog:,}: {errors}")
    add("")
    if client_bound or ceiling["client_cpu"] > 0.85:
        add("WARNING: the client process used > 85% of its core in: "
            + ", ".join(client_bound + (["the ceiling"] if ceiling["client_cpu"] > 0.85 else []))
            + " - the client may be the bottleneck there.")
    else:
        add(f"client CPU stayed below 85% of its core everywhere (ceiling run: {ceiling['client_cpu']:.0%}): "
            "the server, not the client, is the bottleneck.")
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------

SCENARIOS = ["send1", "send10", "recv10+del", "recv1+del1", "roundtrip10", "light", "reads", "fanout", "big", "idle"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10k backlog only, 2 s x 3 runs")
    parser.add_argument("--backlog-sizes", default="10000,1000000", help="comma-separated, e.g. 10000,1000000")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one measured run")
    parser.add_argument("--reps", type=int, default=3, help="measured runs per scenario (medians are printed)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured run before each scenario")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--rt-senders", type=int, default=4, help="round trip: sending connections (rest receive)")
    parser.add_argument("--rt-window", type=int, default=500, help="round trip: most messages queued at once")
    parser.add_argument("--idle-polls", type=int, default=1000)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"subset of {','.join(SCENARIOS)}")
    parser.add_argument("--python", default=None, help="interpreter for the servers (default: the repo's .venv)")
    parser.add_argument("--rev", default=None,
                        help="benchmark the server as of this git revision (e.g. HEAD) instead of the working tree")
    parser.add_argument("--db-dir", default=None, help="where the temporary database goes (default: $TMPDIR)")
    parser.add_argument("--no-ceiling", action="store_true", help="skip the ceiling (fractions are not printed)")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the reference server (scripts/bench/reference_server.py; doubles the run time)")
    parser.add_argument("--quiet", type=float, default=0.15,
                        help="before each run, wait until other processes use less than this fraction of a core")
    parser.add_argument("--quiet-wait", type=float, default=15.0, help="... but at most this many seconds")
    parser.add_argument("--console-page", action="store_true",
                        help="keep one console page open (chromium, scripts/bench/console_watch.py) on queueserver meanwhile")
    parser.add_argument("--json", default=None,
                        help="where every figure goes (default: scripts/bench-results/COMMIT-TIME.json, "
                             "kept out of git; `python scripts/bench report FILE` prints its tables)")
    args = parser.parse_args(argv)
    if args.quick:
        args.backlog_sizes = "10000"
        args.seconds = min(args.seconds, 2.0)
        args.warmup = min(args.warmup, 0.5)
    args.backlogs = [int(float(x)) for x in args.backlog_sizes.split(",") if x.strip()]
    args.scenarios = set(args.scenarios.split(","))
    global QUIET
    QUIET = args.quiet
    if args.python is None:
        venv = REPO / ".venv" / "bin" / "python"
        args.python = str(venv) if venv.exists() else sys.executable
    return args


def machine_facts() -> dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import sqlite3
    return {"nproc": os.cpu_count(), "cpu": model, "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version, "taskset": bool(shutil.which("taskset"))}


async def main_async(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine_facts(), "args": {
        k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()},
        "backlogs": args.backlogs, "by_backlog": {}}
    source = None
    if args.rev:
        source, commit = export_revision(args.rev, tmp / "source")
        results["server_source"] = f"git revision {args.rev} = {commit}"
        results["commit"] = commit
    else:
        results["server_source"] = working_tree_state()
        state = results["server_source"]
        results["commit"] = (state.split(" at ", 1)[1].split()[0] if " at " in state else "no-git") + (
            "-dirty" if "uncommitted" in state else "")
    print(f"machine: {results['machine']}", flush=True)
    print(f"server: {results['server_source']}", flush=True)
    if not args.no_ceiling:
        print("ceiling: queueserver's HTTP stack (raw ASGI, uvicorn + httptools + uvloop, one write per response)",
              flush=True)
        ceiling = start_ceiling(args.python, tmp / "ceiling.log", source)
        try:
            results["ceiling"] = await measure_ceiling(args, ceiling)
        finally:
            ceiling.stop()
    else:
        results["ceiling"] = {"req_per_s": float("nan"), "p50_ms": float("nan"), "p99_ms": float("nan"),
                              "server_cpu": float("nan"), "client_cpu": float("nan"),
                              "foreign_cpu": float("nan"), "msgs_per_cpu_s": float("nan")}
    for backlog in args.backlogs:
        print(f"backlog {backlog:,}: starting queueserver on a fresh database", flush=True)
        db = tmp / f"bench-{backlog}.db"
        server = start_queueserver(args.python, db, tmp / f"queueserver-{backlog}.log", source)
        started = time.perf_counter()
        watcher = start_console_watch(args.python, server.url) if args.console_page else None
        try:
            results["by_backlog"][str(backlog)] = await Bench(args, server, str(backlog)).run(backlog)
        finally:
            if watcher is not None:
                watcher.terminate()
                watcher.wait(30)
            server.stop()
            log = (tmp / f"queueserver-{backlog}.log").read_text(errors="replace").strip()
            if log:
                print(f"  server log (last lines):\n{log[-2000:]}")
            for suffix in ("", "-wal", "-shm", ".lock"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        print(f"  backlog {backlog:,} took {time.perf_counter() - started:.0f} s", flush=True)
    results["reference"] = {"by_backlog": {}}
    reference_args = argparse.Namespace(**{**vars(args), "scenarios": args.scenarios - {"idle", "fanout"}})  # no subscriptions
    for backlog in [] if args.no_reference else args.backlogs:
        print(f"backlog {backlog:,}: starting the reference server (scripts/bench/reference_server.py) on a fresh database",
              flush=True)
        db = tmp / f"reference-{backlog}.db"
        reference = start_reference(args.python, db, tmp / f"reference-{backlog}.log")
        try:
            results["reference"]["by_backlog"][str(backlog)] = await Bench(
                reference_args, reference, f"ref {backlog}").run(backlog)
        finally:
            reference.stop()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the servers get core 0
    try:
        import uvloop
        runner: Callable[[Any], Any] = uvloop.run
    except ImportError:
        runner = asyncio.run
    tmp = Path(tempfile.mkdtemp(prefix="queueserver-bench-", dir=args.db_dir))
    started = time.perf_counter()
    try:
        results = runner(main_async(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results["total_seconds"] = time.perf_counter() - started
    print(f"\nserver: {results['server_source']}; machine: {results['machine']}")
    print(report(results, args))
    print(f"\ntotal time {results['total_seconds']:.0f} s")
    raw = Path(args.json) if args.json else REPO / "scripts" / "bench-results" / (
        f"{results['commit']}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    raw.parent.mkdir(parents=True, exist_ok=True)
    results["report"] = report(results, args).splitlines()
    raw.write_text(json.dumps(results, indent=2, default=str))
    print(f"raw results: {raw}")
    return 0
