"""What the lists that grow with the number of queues cost: /metrics, the console overview, ListQueues.

Starts a server (pinned to core 0; this client runs beside it) on a temporary database, creates
`--queues` queues through the API (CreateQueue over `--concurrency` keep-alive connections) and sends
one message to each (so that every queue has counts and tallies), then measures, in this order:

- the server's RSS (VmRSS) before the first scrape, after it, and its peak (VmHWM);
- a first and a second `/metrics` scrape: bytes and seconds; then the server's CPU time a scrape
  (/proc, all threads: what a shared machine disturbs least);
- other requests during a scrape: a probe sends GetQueueUrl (the event loop alone) and SendMessage
  (through the writer) one after the other for `--probe-seconds` without a scrape and then while
  scrapes run back to back, and reports each one's latencies (p50, p99, max);
- the console overview: the first page, a page after `--pages` "Next" links, and a prefix-filtered
  page: bytes and seconds;
- one ListQueues page of 1,000 and `queueserver queues` (its default page) end to end.

Usage: .venv/bin/python scripts/bench many-queues [--queues 100000] [--concurrency 32] [--source DIR]
(`--source` runs the server from another checkout, e.g. a worktree of an older revision.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.client import Client
from bench.servers import REPO_ROOT, Proc, start_proc

NAME_WIDTH = 6  # q000000 … q099999: names in creation order are in name order too


def queue_name(i: int) -> str:
    return f"q{i:0{NAME_WIDTH}d}"


def get(url: str, timeout: float = 300) -> tuple[int, float]:
    """(bytes, seconds) of one GET, read to the end."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as response:
        size = len(response.read())
    return size, time.perf_counter() - started


def memory_mb(server: Proc) -> tuple[float, float]:
    found = server.memory_mb()
    return found["rss_mb"], found["peak_rss_mb"]


async def each_queue(server: Proc, count: int, concurrency: int, action: str) -> float:
    """`action` (CreateQueue, or SendMessage of one small message) for queue_name(0 … count-1), over
    `concurrency` connections; returns calls per second."""
    next_index = iter(range(count))
    started = time.perf_counter()

    async def worker() -> None:
        client = Client(server.host, server.port)
        try:
            for i in next_index:
                if action == "CreateQueue":
                    await client.call(action, {"QueueName": queue_name(i)})
                else:
                    await client.call(action, {"QueueUrl": f"{server.endpoint}/000000000000/{queue_name(i)}",
                                               "MessageBody": "x" * 100})
        finally:
            client.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def probe(server: Proc, url: str, seconds: float, scraping: bool) -> tuple[dict[str, list[float]], int]:
    """Latencies (s) of GetQueueUrl (answered from memory on the event loop) and SendMessage (through
    the writer), one request at a time, for `seconds`; with `scraping`, /metrics is fetched back to back
    meanwhile (in a thread). Returns (latencies by action, scrapes)."""
    client = Client(server.host, server.port)
    loop = asyncio.get_running_loop()
    stop = time.perf_counter() + seconds
    scrapes = 0

    async def scraper() -> None:
        nonlocal scrapes
        while time.perf_counter() < stop:
            await loop.run_in_executor(None, get, server.endpoint + "/metrics")
            scrapes += 1

    task = asyncio.ensure_future(scraper()) if scraping else None
    latencies: dict[str, list[float]] = {"GetQueueUrl": [], "SendMessage": []}
    calls = (("GetQueueUrl", {"QueueName": queue_name(0)}), ("SendMessage", {"QueueUrl": url, "MessageBody": "probe"}))
    try:
        while time.perf_counter() < stop:
            for action, payload in calls:
                started = time.perf_counter()
                await client.call(action, payload)
                latencies[action].append(time.perf_counter() - started)
        if task is not None:
            await task
    finally:
        client.close()
    return latencies, scrapes


def scrape_cpu_ms(server: Proc, scrapes: int) -> float:
    """The server's CPU time a scrape, less what it spends meanwhile when idle (the retention sweep)."""
    before, started = server.cpu_seconds(), time.perf_counter()
    for _ in range(scrapes):
        get(server.endpoint + "/metrics")
    spent, seconds = server.cpu_seconds() - before, time.perf_counter() - started
    before = server.cpu_seconds()
    time.sleep(seconds)
    idle = server.cpu_seconds() - before
    return (spent - idle) / scrapes * 1000


def describe(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"{len(ordered)} requests, p50 {statistics.median(ordered) * 1000:.1f} ms, "
            f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms")


def overview(server: Proc, pages: int, prefix: str) -> list[str]:
    lines = []
    size, seconds = get(server.endpoint + "/console/")
    lines.append(f"overview, first page: {size / 1024:.1f} KiB in {seconds * 1000:.0f} ms")
    path = "/console/"
    for _ in range(pages):
        with urllib.request.urlopen(server.endpoint + path) as response:
            html = response.read().decode()
        found = re.search(r'<a rel="next" href="([^"]*)"', html)
        if found is None:
            lines.append("overview: no Next link")
            return lines
        path = "/console/" + found.group(1).replace("&amp;", "&")
    size, seconds = get(server.endpoint + path)
    lines.append(f"overview, page {pages + 1} ({path}): {size / 1024:.1f} KiB in {seconds * 1000:.0f} ms")
    size, seconds = get(f"{server.endpoint}/console/?prefix={prefix}")
    lines.append(f"overview, prefix {prefix}: {size / 1024:.1f} KiB in {seconds * 1000:.0f} ms")
    return lines


def admin_queues(server: Proc, source: Path, timeout: float) -> str:
    env = dict(os.environ, PYTHONPATH=str(source), AWS_ENDPOINT_URL_SQS=server.endpoint)
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "queueserver", "queues", "--json"], env=env, cwd=source,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"queueserver queues --json: not done after {timeout:.0f} s"
    seconds = time.perf_counter() - started
    rows = len(json.loads(done.stdout)) if done.returncode == 0 else f"exit {done.returncode}"
    return f"queueserver queues --json: {rows} rows in {seconds:.2f} s"


async def run(args: argparse.Namespace, folder: Path) -> None:
    source = Path(args.source).resolve() if args.source else REPO_ROOT
    server = start_proc([sys.executable, "-m", "queueserver", "serve", "--port", "0", "--db",
                         str(folder / "queues.db"), "--log-level", "warning"], folder / "server.log",
                        "queueserver", source)
    try:
        print(f"server from {source}; {args.queues} queues, {args.concurrency} connections creating them")
        rate = await each_queue(server, args.queues, args.concurrency, "CreateQueue")
        print(f"created at {rate:.0f} queues/s")
        rate = await each_queue(server, args.queues, args.concurrency, "SendMessage")
        print(f"one message sent to each at {rate:.0f} messages/s")
        rss, _ = memory_mb(server)
        print(f"RSS before the first scrape: {rss:.0f} MB")
        for which in ("first", "second"):
            size, seconds = get(server.endpoint + "/metrics")
            rss, peak = memory_mb(server)
            print(f"{which} scrape: {size / 1024:.1f} KiB in {seconds * 1000:.0f} ms; RSS after {rss:.0f} MB, "
                  f"peak {peak:.0f} MB")
        print(f"server CPU a scrape: {scrape_cpu_ms(server, args.cpu_scrapes):.0f} ms (beyond an idle server's, "
              f"mean of {args.cpu_scrapes}; /proc counts 10 ms ticks)")
        client = Client(server.host, server.port)
        url = (await client.call("GetQueueUrl", {"QueueName": queue_name(0)}))["QueueUrl"]
        client.close()
        quiet, _ = await probe(server, url, args.probe_seconds, scraping=False)
        busy, scrapes = await probe(server, url, args.probe_seconds, scraping=True)
        for action in quiet:
            print(f"{action} without a scrape: {describe(quiet[action])}")
            print(f"{action} during {scrapes} back-to-back scrapes: {describe(busy[action])}")
        for line in overview(server, args.pages, queue_name(args.queues // 2)[:-2]):
            print(line)
        size, seconds = await asyncio.get_running_loop().run_in_executor(None, list_queues_page, server)
        print(f"ListQueues MaxResults=1000: {size / 1024:.1f} KiB in {seconds * 1000:.0f} ms")
        print(admin_queues(server, source, args.admin_timeout))
        rss, peak = memory_mb(server)
        print(f"RSS at the end: {rss:.0f} MB, peak {peak:.0f} MB")
    finally:
        server.stop()


def list_queues_page(server: Proc) -> tuple[int, float]:
    body = json.dumps({"MaxResults": 1000}).encode()
    request = urllib.request.Request(server.endpoint + "/", data=body, method="POST", headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        size = len(response.read())
    return size, time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--probe-seconds", type=float, default=10.0)
    parser.add_argument("--cpu-scrapes", type=int, default=5, help="scrapes whose server CPU time is averaged")
    parser.add_argument("--pages", type=int, default=5, help="Next links followed from the first overview page")
    parser.add_argument("--admin-timeout", type=float, default=300, help="seconds `queueserver queues` may take")
    parser.add_argument("--source", help="run the server from this checkout (default: this one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(args, Path(folder)))
