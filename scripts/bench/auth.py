"""Benchmark of SigV4 verification: the same server with credentials on and off, one run.

Two queueserver processes from the same code, pinned to core 0 like scripts/bench load's: one
open (no --credentials), one verifying every signature (--credentials with one key). The client
(this process, core 1; the load benchmark's raw keep-alive connections) runs the scenarios on each in
turn, interleaved repetition by repetition, so load from other processes on a shared machine
falls on both alike:

  send10      SendMessageBatch of 10 (100-byte bodies)
  recv10+del  ReceiveMessage(MaxNumberOfMessages=10) + DeleteMessageBatch of what came back

Requests to the verifying server are signed here with SigV4 (the same canonical request as
botocore's; the signing key is derived once per day, as every SDK caches it). Printed: msgs/s
and msgs per server-CPU-second for each, as medians of --reps runs, and verified/open ratios.

Usage:
  .venv/bin/python scripts/bench auth                       # 3 s x 5 reps, 16 connections
  .venv/bin/python scripts/bench auth --seconds 2 --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.client import Api, Conn, call, connect_many, fresh
from bench.servers import Proc, start_proc

KEY_ID, SECRET, ACCOUNT, REGION = "AKIDBENCH", "bench-secret", "123456789012", "us-east-1"


class SignedApi(Api):
    """Request bytes for the SQS JSON protocol, SigV4-signed (Authorization header form)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self._host_text = f"{host}:{port}"
        self._day = ""
        self._key = b""
        self._second = -1
        self._amz_date = ""
        # A repeated body (every SendMessageBatch, every ReceiveMessage here) is signed once a second:
        # the client must not be what limits the verifying server (SigV4 allows the replay, as AWS does).
        self._signed: dict[tuple[str, bytes], bytes] = {}

    def _signing_key(self, day: str) -> bytes:
        if day != self._day:
            key = ("AWS4" + SECRET).encode()
            for part in (day, REGION, "sqs", "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._day, self._key = day, key
        return self._key

    def req(self, action: str, payload: dict[str, Any] | bytes) -> bytes:
        body = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
        second = int(time.time())
        if second != self._second:
            self._second, self._signed = second, {}
            self._amz_date = datetime.fromtimestamp(second, timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        cached = self._signed.get((action, body))
        if cached is not None:
            return cached
        amz_date = self._amz_date
        target = f"AmazonSQS.{action}"
        content_type = "application/x-amz-json-1.0"
        signed = "content-type;host;x-amz-date;x-amz-target"
        canonical = (f"POST\n/\n\ncontent-type:{content_type}\nhost:{self._host_text}\nx-amz-date:{amz_date}\n"
                     f"x-amz-target:{target}\n\n{signed}\n{hashlib.sha256(body).hexdigest()}")
        scope = f"{amz_date[:8]}/{REGION}/sqs/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._signing_key(amz_date[:8]), to_sign.encode(), hashlib.sha256).hexdigest()
        head = (f"POST / HTTP/1.1\r\nHost: {self._host_text}\r\nContent-Type: {content_type}\r\n"
                f"X-Amz-Target: {target}\r\nX-Amz-Date: {amz_date}\r\n"
                f"Authorization: AWS4-HMAC-SHA256 Credential={KEY_ID}/{scope}, SignedHeaders={signed}, "
                f"Signature={signature}\r\nContent-Length: {len(body)}\r\n\r\n")
        request = head.encode() + body
        if action != "DeleteMessageBatch":  # receipt handles differ every time
            self._signed[(action, body)] = request
        return request


class Target:
    def __init__(self, name: str, proc: Proc, api: Api) -> None:
        self.name, self.proc, self.api = name, proc, api
        self.conns: list[Conn] = []
        self.queue_url = ""


async def run_send10(target: Target, seconds: float, body: str) -> int:
    entries = [{"Id": str(i), "MessageBody": body} for i in range(10)]
    deadline = time.monotonic() + seconds
    sent = 0

    async def one(conn: Conn) -> None:
        nonlocal sent
        while time.monotonic() < deadline:
            await call(conn, target.api, "SendMessageBatch", {"QueueUrl": target.queue_url, "Entries": entries})
            sent += 10

    await asyncio.gather(*(one(c) for c in target.conns))
    return sent


async def run_recv10_del(target: Target, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    done = 0

    async def one(conn: Conn) -> None:
        nonlocal done
        while time.monotonic() < deadline:
            got = await call(conn, target.api, "ReceiveMessage",
                             {"QueueUrl": target.queue_url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 300})
            messages = got.get("Messages", [])
            if not messages:
                raise RuntimeError(f"{target.name}: the queue ran dry; use fewer --seconds or more --prefill")
            await call(conn, target.api, "DeleteMessageBatch", {"QueueUrl": target.queue_url, "Entries": [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]})
            done += len(messages)

    await asyncio.gather(*(one(c) for c in target.conns))
    return done


async def measure(target: Target, scenario: str, seconds: float, body: str) -> dict[str, float]:
    # uvicorn closes a connection idle for 5 s, as one is while the other server is measured
    target.conns = [await fresh(conn, target.proc.host, target.proc.port) for conn in target.conns]
    cpu_before, start = target.proc.cpu_seconds(), time.monotonic()
    count = await (run_send10(target, seconds, body) if scenario == "send10" else run_recv10_del(target, seconds))
    wall, cpu = time.monotonic() - start, target.proc.cpu_seconds() - cpu_before
    return {"msgs_s": count / wall, "msgs_per_cpu_s": count / cpu if cpu > 0 else float("nan")}


async def main_async(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    keys = tmp / "keys.toml"
    keys.write_text(f'[keys.{KEY_ID}]\nsecret_access_key = "{SECRET}"\naccount_id = "{ACCOUNT}"\n')
    python = sys.executable
    base = [python, "-m", "queueserver", "serve", "--port", "0", "--log-level", "warning"]
    open_proc = start_proc([*base, "--db", str(tmp / "open.db")], tmp / "open.log", "open")
    auth_proc = start_proc([*base, "--db", str(tmp / "auth.db"), "--credentials", str(keys)], tmp / "auth.log",
                           "verifying")
    targets = [Target("open", open_proc, Api(open_proc.host, open_proc.port)),
               Target("verifying", auth_proc, SignedApi(auth_proc.host, auth_proc.port))]
    body = "x" * args.body_size
    results: dict[str, dict[str, list[dict[str, float]]]] = {s: {t.name: [] for t in targets}
                                                             for s in ("send10", "recv10+del")}
    try:
        for target in targets:
            target.conns = await connect_many(target.proc.host, target.proc.port, args.connections)
            target.queue_url = (await call(target.conns[0], target.api, "CreateQueue", {"QueueName": "bench"}))[
                "QueueUrl"]
            await run_send10(target, args.warmup, body)
        for rep in range(args.reps):
            order = targets if rep % 2 == 0 else targets[::-1]  # alternate who goes first
            for scenario in ("send10", "recv10+del"):
                for target in order:
                    figure = await measure(target, scenario, args.seconds, body)
                    results[scenario][target.name].append(figure)
                    print(f"rep {rep + 1} {scenario:11s} {target.name:9s} {figure['msgs_s']:9.0f} msgs/s "
                          f"{figure['msgs_per_cpu_s']:9.0f} msgs/server-CPU-s", flush=True)
    finally:
        for target in targets:
            for conn in target.conns:
                conn.close()
            target.proc.stop()
    summary: dict[str, Any] = {}
    for scenario, by_target in results.items():
        row = {name: {metric: statistics.median(r[metric] for r in runs) for metric in ("msgs_s", "msgs_per_cpu_s")}
               for name, runs in by_target.items()}
        row["ratio_msgs_s"] = row["verifying"]["msgs_s"] / row["open"]["msgs_s"]
        row["ratio_msgs_per_cpu_s"] = row["verifying"]["msgs_per_cpu_s"] / row["open"]["msgs_per_cpu_s"]
        summary[scenario] = row
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one measured run")
    parser.add_argument("--reps", type=int, default=5, help="runs per scenario and server (medians are printed)")
    parser.add_argument("--warmup", type=float, default=1.0, help="an unmeasured send run on each server first")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--body-size", type=int, default=100)
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the servers get core 0, as in the load benchmark
    with tempfile.TemporaryDirectory(prefix="auth-bench-") as folder:
        summary = asyncio.run(main_async(args, Path(folder)))
    print(f"\nmedians of {args.reps} interleaved runs of {args.seconds:g} s, {args.connections} connections")
    for scenario, row in summary.items():
        print(f"{scenario:11s} open {row['open']['msgs_s']:8.0f} msgs/s, verifying {row['verifying']['msgs_s']:8.0f}"
              f" msgs/s: {row['ratio_msgs_s']:.2f}x; per server-CPU-second {row['ratio_msgs_per_cpu_s']:.2f}x")
    return 0
