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
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.load_latency import LatencyScenarios
from bench.load_measure import QUIET
from bench.load_polling import PollingScenarios
from bench.load_throughput import ThroughputScenarios, measure_ceiling
from bench.report import report_text
from bench.servers import (
    REPO_ROOT,
    export_revision,
    start_ceiling,
    start_queueserver,
    start_reference,
    working_tree_state,
)


def start_console_watch(python: str, url: str) -> subprocess.Popen[str]:
    """One console page open and refreshing itself, in chromium on the client's core."""
    watcher = subprocess.Popen([python, str(Path(__file__).with_name("console_watch.py")), url], stdout=subprocess.PIPE,
                               text=True)
    assert watcher.stdout is not None
    if watcher.stdout.readline().strip() != "WATCHING":
        watcher.kill()
        raise RuntimeError("scripts/bench/console_watch.py did not open the console page")
    return watcher


class LoadBench(ThroughputScenarios, LatencyScenarios, PollingScenarios):
    """Every scenario on one server; `run` measures those asked for, in the order of this module's docstring."""

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
    parser.add_argument("--quiet", type=float, default=QUIET,
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
    if args.python is None:
        venv = REPO_ROOT / ".venv" / "bin" / "python"
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
            results["by_backlog"][str(backlog)] = await LoadBench(args, server, str(backlog)).run(backlog)
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
            results["reference"]["by_backlog"][str(backlog)] = await LoadBench(
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
    print(report_text(results, args.quiet))
    print(f"\ntotal time {results['total_seconds']:.0f} s")
    raw = Path(args.json) if args.json else REPO_ROOT / "scripts" / "bench-results" / (
        f"{results['commit']}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    raw.parent.mkdir(parents=True, exist_ok=True)
    results["report"] = report_text(results, args.quiet).splitlines()
    raw.write_text(json.dumps(results, indent=2, default=str))
    print(f"raw results: {raw}")
    return 0
