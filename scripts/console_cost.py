#!/usr/bin/env python3
"""What an open console page costs the server: its CPU time per refresh, measured on the server itself.

The bench's `--console-page` runs a headless chromium beside the client while the scenarios run;
on this 2-vCPU machine the browser shares the hardware with the server's core, so that run mixes
the browser's own CPU into the server's figures. This script measures the server alone: a server
on a temporary database with `--queues` queues, the first holding `--messages` messages, then
rounds of "send one message, wait out the count cache" with and without a render of the page in
between (alternating), and the difference in the server process's CPU time (/proc/PID/stat, all
threads) per render. One send a round keeps the counts changing, so every render reads them anew.

Usage: .venv/bin/python scripts/console_cost.py [--queues 5] [--messages 30000] [--rounds 6]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.request
from pathlib import Path

from benchkit import make_client, running, stat_cpu_seconds

PAGES = ("/console/", "/console/queues/us-east-1/000000000000/q0")
COUNTS_MAX_AGE_S = 2.5  # a little more than the count cache's staleness bound, so each render recounts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", type=int, default=5)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, running(Path(folder) / "q.db") as server:
        sqs = make_client(server.endpoint)
        urls = [sqs.create_queue(QueueName=f"q{i}")["QueueUrl"] for i in range(args.queues)]
        for _ in range(args.messages // 10):
            sqs.send_message_batch(QueueUrl=urls[0], Entries=[{"Id": str(j), "MessageBody": "x" * 100}
                                                              for j in range(10)])
        stat = f"/proc/{server.proc.pid}/stat"
        for page in PAGES:
            urllib.request.urlopen(server.endpoint + page).read()  # templates compiled, caches warm
            spent: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.rounds):
                for render in (False, True):
                    before = stat_cpu_seconds(stat)
                    sqs.send_message(QueueUrl=urls[0], MessageBody="y")
                    time.sleep(COUNTS_MAX_AGE_S)
                    if render:
                        urllib.request.urlopen(server.endpoint + page).read()
                    spent[render].append(stat_cpu_seconds(stat) - before)
            without, with_render = (sum(spent[r]) / args.rounds * 1000 for r in (False, True))
            extra_ms = with_render - without
            print(f"{page}: server CPU per round {without:.1f} ms without a render, {with_render:.1f} ms with one: "
                  f"{extra_ms:.1f} ms a render (means of {args.rounds}: /proc counts 10 ms ticks); at one render "
                  f"every 5 s, {extra_ms / 5000 * 100:.2f} % of a core")


if __name__ == "__main__":
    main()
