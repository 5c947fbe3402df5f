"""Replication's restore time: a million messages restored from a replica.

(The loss window is measured by the crash tier's soak run, `pytest -m soak tests/crash -s`: its
losses of the machine use the crash workload, which is test support.)

 a server replicating to a folder is filled with `--messages` messages (batches of
10 bodies of 200 bytes, over 32 connections), stopped, and `queueserver restore` (Litestream's
restore, then `queueserver check`) is timed from the replica; the same from moto's S3 when
`--s3` is given.

    .venv/bin/python scripts/bench replication --messages 1000000 --s3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
from bench.client import Api, connect_many

from queueserver.testing import QueueServer

BODY = "x" * 200
CONNECTIONS = 32


def replicating(endpoint: str) -> bool:
    """Litestream has reported the replica's position (its first snapshot is up), says GET /ready."""
    with urllib.request.urlopen(f"{endpoint}/ready", timeout=10) as response:
        return json.loads(response.read())["replication"].get("transactions_behind") is not None


def wait_until_replicating(server: QueueServer, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not replicating(server.endpoint):
        if time.monotonic() > deadline or not server.running:
            raise SystemExit(f"replication did not start\n{server.stderr_text()}")
        time.sleep(0.1)  # a bounded poll: Litestream's first snapshot


def restore(replica_args: list[str], db: Path) -> float:
    """`queueserver restore` of the replica into `db`; returns its seconds."""
    options = dict(zip(replica_args[::2], replica_args[1::2]))
    argv = [sys.executable, "-m", "queueserver", "restore", "--from", options["--replicate"], "--db", str(db)]
    if "--replica-endpoint" in options:
        argv += ["--replica-endpoint", options["--replica-endpoint"]]
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"queueserver restore exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return seconds


async def fill(endpoint: str, messages: int) -> float:
    host, port = endpoint.removeprefix("http://").split(":")
    api = Api(host, int(port))
    conns = await connect_many(host, int(port), CONNECTIONS)
    create = await conns[0].request(api.req("CreateQueue", {"QueueName": "restored"}))
    url = json.loads(create[1])["QueueUrl"]
    batch = api.req("SendMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": str(i), "MessageBody": BODY} for i in range(10)]})
    left = [messages // 10]
    began = time.perf_counter()

    async def worker(conn: object) -> None:
        while left[0] > 0:
            left[0] -= 1
            status, body = await conn.request(batch)  # type: ignore[attr-defined]
            if status != 200 or b'"Failed":[]' not in body:
                raise RuntimeError(f"fill: {status} {body[:200]!r}")

    await asyncio.gather(*(worker(c) for c in conns))
    for conn in conns:
        conn.close()
    return time.perf_counter() - began


def restore_time(workdir: Path, messages: int, replica_args: list[str]) -> tuple[float, int]:
    """Fill a replicating server, stop it, restore from the replica: (seconds, bytes of the database)."""
    primary = workdir / "primary"
    primary.mkdir(parents=True)
    with QueueServer(primary / "queueserver.db", test_clock=False, extra_args=replica_args, ready_timeout=60) as server:
        wait_until_replicating(server)
        took = asyncio.run(fill(server.endpoint, messages))
        print(f"filled {messages:,} messages in {took:.0f} s", flush=True)
        server.stop(timeout=120, check=True)
    size = (primary / "queueserver.db").stat().st_size
    shutil.rmtree(primary)
    restored = workdir / "fresh" / "queueserver.db"
    restored.parent.mkdir()
    seconds = restore(replica_args, restored)
    shutil.rmtree(restored.parent)
    return seconds, size


@contextlib.contextmanager
def moto_s3(workdir: Path) -> Iterator[str]:
    """moto's server (its S3 stands in for object storage), on a loopback port, with a bucket."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = open(workdir / "moto.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(Exception):
                boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="replicas")
                break
            time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait()
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages to restore (default 1,000,000)")
    parser.add_argument("--s3", action="store_true", help="also restore from moto's S3")
    args = parser.parse_args(argv)
    for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
        os.environ.setdefault(name, value)
    workdir = Path(tempfile.mkdtemp(prefix="queueserver-replication-"))
    try:
        restores = {"folder": restore_time(workdir / "folder", args.messages, [
            "--replicate", str(workdir / "folder-replica")])} if args.messages else {}
        if args.s3 and args.messages:
            with moto_s3(workdir) as endpoint:
                restores["S3 (moto)"] = restore_time(workdir / "s3", args.messages, [
                    "--replicate", "s3://replicas/queueserver", "--replica-endpoint", endpoint])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for where, (seconds, size) in restores.items():
        print(f"restore of {args.messages:,} messages ({size / 1e6:.0f} MB) from a {where} replica: {seconds:.1f} s")
    return 0
