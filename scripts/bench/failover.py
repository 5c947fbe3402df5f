"""Failover: RTO and RPO of a warm standby promoted when its primary dies under load.

A primary replicates to a folder (`--replicate`, uploads every second); a standby
(`queueserver standby --from`) follows it. `--senders` threads send single messages as fast
as the server acknowledges them, each to whichever server is the primary now. After
`--seconds` of load the primary and its Litestream are SIGKILLed, `queueserver promote` is
run at once (an orchestrator that noticed instantly: add your detection time), and the
senders move to the promoted server. Measured, over `--runs` failovers:

* RTO: from the kill to the first send acknowledged by the promoted server (sent after the kill);
* promotion: how long `queueserver promote` took;
* RPO: of the sends the dead primary acknowledged, how many the promoted server lacks, and the
  age at the kill of the oldest one it lacks (the promoted server's queue is drained and compared).

    .venv/bin/python scripts/bench failover --runs 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3
from botocore.config import Config

from queueserver.testing import QueueServer

QUEUE = "failover"


def _get(endpoint: str, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{endpoint}{path}", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _until(predicate, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)  # a bounded poll of the server's own report


def _client(endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                        aws_secret_access_key="bench", config=Config(retries={"max_attempts": 0},
                                                                     connect_timeout=1, read_timeout=5))


class Senders:
    """Threads sending to the current endpoint; every acknowledgment recorded with its times."""

    def __init__(self, count: int, endpoint: str) -> None:
        self.endpoint = endpoint
        self.acked: dict[str, tuple[float, float]] = {}  # body -> (started, acknowledged)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, args=(i,), daemon=True) for i in range(count)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _send(self, index: int) -> None:
        current, client, url, n = "", None, "", 0
        while not self._stop.is_set():
            try:
                if current != self.endpoint:
                    current = self.endpoint
                    client = _client(current)
                    url = client.get_queue_url(QueueName=QUEUE)["QueueUrl"]
                body = f"{index}-{n}"
                n += 1
                started = time.time()
                client.send_message(QueueUrl=url, MessageBody=body)  # type: ignore[union-attr]
                with self._lock:
                    self.acked[body] = (started, time.time())
            except Exception:  # noqa: BLE001 - the primary is dead, or the standby not yet promoted
                current = ""
                time.sleep(0.01)


def _bodies(endpoint: str) -> set[str]:
    client = _client(endpoint)
    url = client.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    found: set[str] = set()
    while batch := client.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                          VisibilityTimeout=3600).get("Messages", []):
        found.update(m["Body"] for m in batch)
    return found


def _kill(server: QueueServer) -> float:
    for task in Path(f"/proc/{server.pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(child), signal.SIGKILL)
    server.send_signal(signal.SIGKILL)
    killed = time.time()
    server.kill()
    return killed


def one_failover(workdir: Path, senders_count: int, seconds: float) -> dict[str, float]:
    replica = workdir / "replica"
    primary = QueueServer(workdir / "primary.db", test_clock=False, ready_timeout=60,
                          extra_args=("--replicate", str(replica))).start()
    standby = QueueServer(workdir / "standby.db", test_clock=False, command="standby", ready_timeout=60,
                          extra_args=("--from", str(replica)))
    try:
        _client(primary.endpoint).create_queue(QueueName=QUEUE)
        _until(lambda: _get(primary.endpoint, "/ready")[1]["replication"].get("transactions_behind") is not None,
               "replication to start")
        standby.start()
        _until(lambda: _get(standby.endpoint, "/ready")[1].get("replication", {}).get("transactions_behind") == 0,
               "the standby to follow")
        senders = Senders(senders_count, primary.endpoint)
        senders.start()
        time.sleep(seconds)  # the load's duration: a benchmark parameter, not a wait for an event
        killed = _kill(primary)
        began = time.time()
        done = subprocess.run([sys.executable, "-m", "queueserver", "promote", "--endpoint", standby.endpoint],
                              capture_output=True, text=True, timeout=120, check=False)
        promoted = time.time() - began
        if done.returncode != 0:
            raise SystemExit(f"promote failed: {done.stderr}")
        senders.endpoint = standby.endpoint
        _until(lambda: any(s > killed for s, _ in list(senders.acked.values())), "a send on the promoted server")
        senders.stop()
        rto = min(a for s, a in senders.acked.values() if s > killed) - killed
        before = {body: times for body, times in senders.acked.items() if times[0] <= killed}
        missing = _missing(before, _bodies(standby.endpoint), killed)
        return {"rto": rto, "promote": promoted, "acked_before": len(before), "lost": len(missing),
                "rpo": max(missing, default=0.0)}
    finally:
        primary.kill()
        standby.kill()


def _missing(before: dict[str, tuple[float, float]], present: set[str], killed: float) -> list[float]:
    """The age at the kill of every acknowledged send the promoted server lacks."""
    return [killed - min(acked, killed) for body, (_, acked) in before.items() if body not in present]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="failovers to measure (default 3)")
    parser.add_argument("--senders", type=int, default=8, help="sending threads (default 8)")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of load before the kill (default 5)")
    args = parser.parse_args(argv)
    results = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="queueserver-failover-") as folder:
            result = one_failover(Path(folder), args.senders, args.seconds)
        results.append(result)
        print(f"run {run + 1}: RTO {result['rto']:.2f} s (promotion {result['promote']:.2f} s); "
              f"lost {result['lost']:.0f} of {result['acked_before']:.0f} acknowledged, the oldest "
              f"{result['rpo']:.2f} s before the kill", flush=True)
    for key, name in (("rto", "RTO"), ("promote", "promotion"), ("rpo", "RPO (oldest lost)")):
        values = [r[key] for r in results]
        print(f"{name}: median {statistics.median(values):.2f} s, max {max(values):.2f} s")
    return 0
