#!/usr/bin/env python3
"""What recording a request's metrics costs on the hot path: the plain tallies the server uses
(queueserver/tallies.py) against the same recording through prometheus-client's metric objects,
which take a lock per call. One SendMessage records: its queue's sent counter and size histogram,
and its action's latency histogram (two perf_counter calls around it).

Usage: .venv/bin/python scripts/metrics_cost.py
"""

from __future__ import annotations

import time
import timeit

from prometheus_client import CollectorRegistry, Counter, Histogram

from queueserver.tallies import QueueTally, RequestTally

N = 200_000


def tallies() -> float:
    requests, queues = RequestTally(), {1: QueueTally()}

    def one() -> None:
        began = time.perf_counter()
        tally = queues.get(1)
        assert tally is not None
        tally.sent += 1
        tally.sizes.observe(100)
        requests.histogram("SendMessage", 200).observe(time.perf_counter() - began)

    return min(timeit.repeat(one, number=N, repeat=5)) / N


def prometheus_objects() -> float:
    registry = CollectorRegistry()
    latency = Histogram("latency_seconds", "", ["action", "outcome"], registry=registry)
    sent = Counter("sent", "", ["queue"], registry=registry)
    sizes = Histogram("size_bytes", "", ["queue"], registry=registry)

    def one() -> None:
        began = time.perf_counter()
        sent.labels("q").inc()
        sizes.labels("q").observe(100)
        latency.labels("SendMessage", "success").observe(time.perf_counter() - began)

    return min(timeit.repeat(one, number=N, repeat=5)) / N


if __name__ == "__main__":
    print(f"plain tallies:                {tallies() * 1e9:6.0f} ns a request")
    print(f"prometheus-client's objects:  {prometheus_objects() * 1e9:6.0f} ns a request")
