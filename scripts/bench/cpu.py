"""Server CPU per request, for comparing revisions on a shared, noisy machine.

Wall-clock throughput moves with whatever else the machine runs; the CPU time the server
process spends per request moves much less. For each revision (`--rev`, a git revision, or
`.` for the working tree) this starts the server on a temporary database (scripts/bench load's
launcher and its lean keep-alive client), drives `--requests` requests of each scenario over
`--connections` connections, and reads the server's utime+stime (all threads) from /proc
before and after: µs of server CPU per request. Revisions are measured interleaved, round
after round, and the minimum over `--rounds` is printed (noise only ever adds CPU).

`--callgrind` runs the server under valgrind's callgrind and counts instructions per request
instead (all threads; ~50x slower, so use ~1000 requests): a count that does not move with
the machine's load at all, for telling apart differences of a few per cent. It needs valgrind.

Scenarios: send1 (SendMessage), send10 (SendMessageBatch of 10), recv1+del1
(ReceiveMessage 1 + DeleteMessage: a pair counts as two requests), recv10+del
(ReceiveMessage 10 + DeleteMessageBatch: two requests).

`--rev reference` measures the reference server of `scripts/bench load` (the design's minimal SQS
server) in its turn like a revision, so a ratio to it comes from one interleaved run: each revision's
messages per server-CPU-second (or per instruction) against it from the minima, and (without
--callgrind) the median over the rounds of each round's ratios, of throughput and of CPU, which a
machine whose speed drifts from round to round disturbs least. Every other round runs the servers in
the reverse order.

`--signed` runs the server with credentials on (one key) and signs every request with SigV4
(scripts/bench auth's signer: the Authorization header as botocore sends it), so the figures
include verification and the authorization decision.

Usage:
  .venv/bin/python scripts/bench cpu --rev b593dab --rev ebe8b7f --rev .
  .venv/bin/python scripts/bench cpu --rev HEAD --requests 4000 --rounds 5 --scenarios send1
  .venv/bin/python scripts/bench cpu --rev HEAD --rev . --callgrind --requests 1000 --rounds 1
  .venv/bin/python scripts/bench cpu --rev HEAD --rev . --callgrind --signed --requests 1000 --rounds 1
  .venv/bin/python scripts/bench cpu --rev . --rev reference --scenarios recv10+del,recv1+del1 --rounds 12 \\
      --requests 4000 --connections 16
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import statistics
import tempfile
import time
from pathlib import Path

from bench.auth import ACCOUNT, KEY_ID, SECRET, SignedApi
from bench.client import Api, Conn, call, connect_many
from bench.cost import Callgrind
from bench.servers import REFERENCE_SERVER, Proc, export_revision, pinned, start_proc, start_queueserver

REFERENCE = "reference"

SCENARIOS = ["send1", "send10", "recv1+del1", "recv10+del"]


class Meter:
    """Server CPU seconds from /proc, or (with `callgrind`, the server running under it) instructions."""

    def __init__(self, server: Proc, callgrind: Callgrind | None) -> None:
        self.server, self.callgrind = server, callgrind

    def start(self) -> None:
        if self.callgrind is not None:
            self.callgrind.zero(self.server.pid)
        else:
            self.began = self.server.cpu_seconds()

    def stop(self) -> float:
        """µs of CPU, or thousands of instructions (same scale: ~1k instructions a µs), since start."""
        if self.callgrind is None:
            return (self.server.cpu_seconds() - self.began) * 1e6
        return self.callgrind.kinstructions(self.server.pid)


async def drive(server: Proc, scenario: str, requests: int, connections: int, meter: Meter,
                signed: bool) -> tuple[float, float]:
    """Server CPU µs (or k-instructions) per request of `scenario`, and requests per second (the queue is
    created and filled unmeasured)."""
    api = SignedApi(server.host, server.port) if signed else Api(server.host, server.port)
    conns = await connect_many(server.host, server.port, connections)
    url = (await call(conns[0], api, "CreateQueue", {"QueueName": f"cpu-{scenario.replace('+', '-')}"}))["QueueUrl"]
    body = "x" * 100
    per_conn = requests // connections
    if scenario.startswith("recv"):
        batch = [{"Id": str(i), "MessageBody": body} for i in range(10)]
        fills = requests // 2 * (10 if scenario == "recv10+del" else 1) // 10 + connections
        for i in range(0, fills, connections):
            await asyncio.gather(*(call(c, api, "SendMessageBatch", {"QueueUrl": url, "Entries": batch})
                                   for c in conns))

    async def worker(conn: Conn) -> None:
        if scenario == "send1":
            for _ in range(per_conn):
                await call(conn, api, "SendMessage", {"QueueUrl": url, "MessageBody": body})
        elif scenario == "send10":
            entries = [{"Id": str(i), "MessageBody": body} for i in range(10)]
            for _ in range(per_conn):
                await call(conn, api, "SendMessageBatch", {"QueueUrl": url, "Entries": entries})
        else:
            many = scenario == "recv10+del"
            for _ in range(per_conn // 2):
                got = (await call(conn, api, "ReceiveMessage", {
                    "QueueUrl": url, "MaxNumberOfMessages": 10 if many else 1})).get("Messages", [])
                if many:
                    await call(conn, api, "DeleteMessageBatch", {"QueueUrl": url, "Entries": [
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]})
                else:
                    await call(conn, api, "DeleteMessage", {"QueueUrl": url,
                                                                  "ReceiptHandle": got[0]["ReceiptHandle"]})

    meter.start()
    began = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    wall = time.perf_counter() - began
    spent = meter.stop()
    for c in conns:
        c.close()
    done = per_conn * connections
    return spent / done, done / wall


def measure(python: str, source: Path | str | None, tmp: Path, args: argparse.Namespace,
            tag: str) -> dict[str, tuple[float, float]]:
    credentials: list[str] = []
    if args.signed:
        keys = tmp / "keys.toml"
        keys.write_text(f'[keys.{KEY_ID}]\nsecret_access_key = "{SECRET}"\n'
                        f'account_id = "{ACCOUNT}"\n')
        credentials = ["--credentials", str(keys)]
    callgrind = Callgrind(tmp / f"{tag}.cg") if args.callgrind else None
    under = [*pinned(), *callgrind.command()] if callgrind is not None else None
    if source == REFERENCE:
        server = start_proc([python, str(REFERENCE_SERVER), str(tmp / f"{tag}.db")], tmp / f"{tag}.log",
                            "reference server", run_under=under, ready_timeout=900)
    elif callgrind is not None:
        # a server under valgrind takes minutes to start
        server = start_proc([python, "-m", "queueserver", "serve", "--port", "0", "--db", str(tmp / f"{tag}.db"),
                             "--log-level", "warning", *credentials], tmp / f"{tag}.log", "queueserver", source,
                            run_under=under, ready_timeout=900)
    else:
        server = start_queueserver(python, tmp / f"{tag}.db", tmp / f"{tag}.log", source, *credentials)
    meter = Meter(server, callgrind)
    try:
        return {s: asyncio.run(drive(server, s, args.requests, args.connections, meter, args.signed))
                for s in args.scenarios}
    finally:
        server.stop()
        for f in tmp.glob(f"{tag}.db*"):
            f.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rev", action="append", default=[], help="a git revision, or . for the working tree")
    parser.add_argument("--scenarios", type=lambda s: s.split(","), default=SCENARIOS)
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true", help="count instructions under valgrind instead")
    parser.add_argument("--signed", action="store_true", help="credentials on, every request signed with SigV4")
    args = parser.parse_args(argv)
    revs = args.rev or ["."]
    with tempfile.TemporaryDirectory(prefix="cpu-per-request-") as name:
        tmp = Path(name)
        if REFERENCE in revs and args.signed:
            parser.error("the reference server has no credentials: --signed cannot measure it")
        sources: dict[str, Path | str | None] = {
            rev: None if rev == "." else REFERENCE if rev == REFERENCE else export_revision(rev, tmp / f"src-{i}")[0]
            for i, rev in enumerate(revs)}
        best: dict[str, dict[str, float]] = {rev: {} for rev in revs}
        rounds: list[dict[str, dict[str, tuple[float, float]]]] = []
        for round_no in range(args.rounds):
            rounds.append({})
            for i, rev in (list(enumerate(revs)) if round_no % 2 == 0 else list(enumerate(revs))[::-1]):
                got = measure(sys.executable, sources[rev], tmp, args, f"r{round_no}-{i}")
                rounds[-1][rev] = got
                for s, (us, _) in got.items():
                    best[rev][s] = min(us, best[rev].get(s, us))
                print(f"round {round_no + 1} {rev:>10}: "
                      + "  ".join(f"{s} {us:6.1f} ({rate:,.0f} req/s)" for s, (us, rate) in got.items()),
                      file=sys.stderr, flush=True)
    unit = "thousands of instructions (callgrind)" if args.callgrind else "µs of server CPU"
    print(f"{unit} per {'signed ' if args.signed else ''}request, min of {args.rounds} rounds of {args.requests} "
          f"requests:")
    print(f"{'revision':>12} " + " ".join(f"{s:>11}" for s in args.scenarios))
    for rev in revs:
        print(f"{rev:>12} " + " ".join(f"{best[rev][s]:11.1f}" for s in args.scenarios))
    if REFERENCE in revs:
        print("messages per server-CPU-second (or per instruction) against the reference server:")
        for rev in revs:
            if rev != REFERENCE:
                print(f"{rev:>12} " + " ".join(f"{best[REFERENCE][s] / best[rev][s]:10.3f}x" for s in args.scenarios))
        if not args.callgrind:  # each round's ratio taken in that round, whatever the machine did meanwhile
            print(f"against the reference round by round (median of {args.rounds}), throughput / per CPU-second:")
            for rev in revs:
                if rev != REFERENCE:
                    print(f"{rev:>12} " + " ".join(
                        f"{statistics.median(r[rev][s][1] / r[REFERENCE][s][1] for r in rounds):7.3f}x /"
                        f" {statistics.median(r[REFERENCE][s][0] / r[rev][s][0] for r in rounds):5.3f}x"
                        for s in args.scenarios))
    return 0
