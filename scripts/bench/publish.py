"""Publishing to a topic whose subscriptions are 1, 4 and 16 queues, over HTTP against a real server.

A server of this checkout (pinned to core 0, fsync on: a publish is answered once durable in every
queue) gets PublishBatch requests of 10 messages from `--clients` keep-alive connections (threads on
core 1) for `--seconds` seconds per configuration. Per configuration: messages published per second,
deliveries stored per second (published x queues), and the server's CPU per published message. The
configurations: raw delivery (the message alone in each queue) and envelopes (the JSON envelope,
signed once per message with RSA-SHA1, written into each queue). Beside them, for comparison, the same
clients sending SendMessageBatch of 10 to one queue (what a publish to one raw queue is measured against).

Usage: .venv/bin/python scripts/bench publish [--queues 1,4,16] [--seconds 5] [--clients 8] [--body-size 100]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable
from urllib.parse import urlencode

from bench import servers

BATCH = 10
# Any key is accepted with credentials off; the scope names the service, as an SDK's signature does.
SNS_AUTHORIZATION = ("AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/sns/aws4_request, "
                     "SignedHeaders=host, Signature=0")


class SnsBenchConnection:
    def __init__(self, endpoint: str) -> None:
        host, port = endpoint.removeprefix("http://").rsplit(":", 1)
        self._conn = http.client.HTTPConnection(host, int(port), timeout=120)

    def sns(self, params: dict[str, str]) -> str:
        self._conn.request("POST", "/", urlencode({**params, "Version": "2010-03-31"}),
                           {"Content-Type": "application/x-www-form-urlencoded",
                            "Authorization": SNS_AUTHORIZATION})
        response = self._conn.getresponse()
        text = response.read().decode()
        if response.status != 200:
            raise RuntimeError(f"{params['Action']}: {response.status} {text}")
        return text

    def sqs(self, action: str, members: dict[str, object]) -> dict[str, object]:
        self._conn.request("POST", "/", json.dumps(members), {"X-Amz-Target": f"AmazonSQS.{action}",
                                                              "Content-Type": "application/x-amz-json-1.0"})
        response = self._conn.getresponse()
        body = json.loads(response.read() or b"{}")
        if response.status != 200:
            raise RuntimeError(f"{action}: {response.status} {body}")
        return body


def _wire(endpoint: str, name: str, queues: int, raw: bool) -> str:
    """A topic with `queues` subscribed queues; returns its ARN."""
    conn = SnsBenchConnection(endpoint)
    text = conn.sns({"Action": "CreateTopic", "Name": name})
    arn = text.split("<TopicArn>", 1)[1].split("</TopicArn>", 1)[0]
    for i in range(queues):
        conn.sqs("CreateQueue", {"QueueName": f"{name}-{i}"})
        conn.sns({"Action": "Subscribe", "TopicArn": arn, "Protocol": "sqs",
                  "Endpoint": f"arn:aws:sqs:us-east-1:000000000000:{name}-{i}",
                  "Attributes.entry.1.key": "RawMessageDelivery", "Attributes.entry.1.value": str(raw).lower()})
    return arn


def _run(clients: int, seconds: float, request: Callable[[SnsBenchConnection], object], endpoint: str) -> int:
    """Requests made by `clients` connections in `seconds`."""
    counts = [0] * clients
    stop = time.monotonic() + seconds

    def client(index: int) -> None:
        conn = SnsBenchConnection(endpoint)
        while time.monotonic() < stop:
            request(conn)
            counts[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts)


def measure(proc: servers.Proc, label: str, seconds: float, clients: int,
            request: Callable[[SnsBenchConnection], object], copies: int) -> dict[str, object]:
    cpu_before = proc.cpu_seconds()
    started = time.monotonic()
    requests = _run(clients, seconds, request, proc.endpoint)
    elapsed = time.monotonic() - started
    messages = requests * BATCH
    cpu = proc.cpu_seconds() - cpu_before
    return {"configuration": label, "messages_per_s": round(messages / elapsed),
            "stored_per_s": round(messages * copies / elapsed),
            "server_cpu_us_per_message": round(cpu / messages * 1e6, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench publish", description=__doc__.splitlines()[0])
    parser.add_argument("--queues", default="1,4,16", help="subscribed queues per configuration")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    body = "x" * args.body_size
    folder = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    proc = servers.start_queueserver(sys.executable, folder / "publish.db", folder / "server.log")
    results = []
    try:
        send = SnsBenchConnection(proc.endpoint)
        send.sqs("CreateQueue", {"QueueName": "plain"})
        url = f"{proc.endpoint}/000000000000/plain"
        entries = [{"Id": str(i), "MessageBody": body} for i in range(BATCH)]
        results.append(measure(proc, "SendMessageBatch(10), 1 queue", args.seconds, args.clients,
                               lambda c: c.sqs("SendMessageBatch", {"QueueUrl": url, "Entries": entries}), 1))
        for raw in (True, False):
            for queues in (int(n) for n in args.queues.split(",")):
                arn = _wire(proc.endpoint, f"t{queues}{'raw' if raw else 'env'}", queues, raw)
                params = {"Action": "PublishBatch", "TopicArn": arn}
                for i in range(BATCH):
                    params[f"PublishBatchRequestEntries.member.{i + 1}.Id"] = str(i)
                    params[f"PublishBatchRequestEntries.member.{i + 1}.Message"] = body
                label = f"PublishBatch(10) to {queues} queue{'s' if queues > 1 else ''}, " + (
                    "raw" if raw else "envelope")
                results.append(measure(proc, label, args.seconds, args.clients,
                                       lambda c, p=params: c.sns(p), queues))
    finally:
        proc.stop()
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print("| configuration | messages/s | stored in queues/s | server CPU µs/message |")
        print("|---|---:|---:|---:|")
        for r in results:
            print(f"| {r['configuration']} | {r['messages_per_s']:,} | {r['stored_per_s']:,} | "
                  f"{r['server_cpu_us_per_message']} |")
    return 0
