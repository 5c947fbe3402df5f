"""`python scripts/bench SUBCOMMAND [ARGS...]`: one command line, one subcommand per benchmark.

Each subcommand is a module of this package with a docstring (its help) and `main(argv) -> int`;
`python scripts/bench SUBCOMMAND -h` shows its options.
"""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS = {
    "load": ("bench.load", "throughput and server CPU of every scenario, against the reference design"),
    "compare": ("bench.compare", "two sets of `load --json` results side by side"),
    "report": ("bench.report", "the markdown tables of docs/benchmarks.md from `load --json` results"),
    "cost": ("bench.cost", "instructions per request under callgrind; the cost guard of CI (--check)"),
    "cpu": ("bench.cpu", "server CPU (or instructions) per request, revisions interleaved"),
    "auth": ("bench.auth", "SigV4 verification: the same server with credentials on and off"),
    "fifo": ("bench.fifo", "FIFO queues: group counts, fair queues, receive cost against backlog"),
    "fanout": ("bench.fanout", "what a subscription costs per message sent, and at scale"),
    "publish": ("bench.publish", "publishing to a topic with 1, 4 and 16 subscribed queues, over HTTP"),
    "send-index": ("bench.send_index", "what each index on messages costs a send"),
    "many-queues": ("bench.many_queues", "100,000 queues: creation, sends, listing, memory"),
    "replication": ("bench.replication", "restore time of a million messages from a replica"),
    "failover": ("bench.failover", "RTO and RPO of a standby promoted when its primary dies under load"),
    "startup": ("bench.startup", "how long a server takes to answer after it is started"),
}


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = [f"  {name:<{width}}  {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    return "usage: python scripts/bench SUBCOMMAND [ARGS...]\n\nsubcommands:\n" + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage(), end="")
        return 0 if args else 2
    if args[0] not in SUBCOMMANDS:
        print(f"unknown subcommand {args[0]!r}\n\n{usage()}", end="", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[args[0]][0])
    return int(module.main(args[1:]) or 0)
