"""How long the pytest plugin's `queueserver` fixture takes: from the call to a client that answers.

Each round makes a QueueServer on a new database, starts it, builds a boto3 client and waits
for a ListQueues answer, then closes it. The first round also pays for loading botocore's
service model in this process, as a test session's first fixture does; it is shown apart.

    python scripts/bench startup [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

from queueserver.testing import QueueServer


def one_round() -> float:
    started = time.perf_counter()
    server = QueueServer().start()
    try:
        server.client().list_queues()
        return time.perf_counter() - started
    finally:
        server.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    first = one_round()
    times = sorted(one_round() for _ in range(args.rounds))
    print(f"first round (loads botocore's model): {first * 1000:.0f} ms")
    print(f"next {args.rounds} rounds: median {statistics.median(times) * 1000:.0f} ms, "
          f"min {times[0] * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms")
