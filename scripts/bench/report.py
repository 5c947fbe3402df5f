"""The figures of docs/benchmarks.md, as markdown, from the raw results of `python scripts/bench load`.

`load` writes every run's raw results (every repetition, the machine, the server's source) to a JSON
file; this prints that run's table again, to paste into the report's current figures:

    python scripts/bench load --rev HEAD --json run.json    # on a quiet machine: ~15-20 min
    python scripts/bench report run.json
    python scripts/bench cost                                # the instruction counts, the other table
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.load_measure import QUIET, median
from bench.load_throughput import BIG_BODIES

TARGET_WAKE_MS = 5.0
TARGET_RSS_MB = 200.0
# Messages carried per HTTP request, for the fraction of the ceiling.
MSGS_PER_REQUEST = {
    "send1": 1.0,
    "send10": 10.0,
    "recv10+del": 5.0,      # receive 10 + delete 10: two requests per 10 messages
    "recv1+del1": 0.5,      # receive 1 + delete 1
    "roundtrip10": 10 / 3,  # send 10 + receive 10 + delete 10
}

LABELS = {
    "send1": "SendMessage",
    "send10": "SendMessageBatch(10)",
    "recv10+del": "receive(10) + DeleteMessageBatch",
    "recv1+del1": "receive(1) + DeleteMessage",
    "roundtrip10": "round trip batch(10), long poll",
    "light": "light load e2e (100 msgs/s)",
}


def report_text(results: dict[str, Any], quiet_threshold: float) -> str:
    """The tables and notes of a run's raw results; `quiet_threshold` is the --quiet its quiet runs were told by."""
    ceiling = results["ceiling"]
    reference = results.get("reference", {}).get("by_backlog", {})
    lines: list[str] = []
    add = lines.append
    add("")
    add(f"measured at: {results['server_source']} (commit {results['commit']})")
    add(f"HTTP ceiling (queueserver's HTTP stack, raw ASGI, constant answer): {ceiling['req_per_s']:,.0f} req/s, "
        f"p50 {ceiling['p50_ms']:.2f} ms, p99 {ceiling['p99_ms']:.2f} ms, server CPU {ceiling['server_cpu']:.0%}, "
        f"client CPU {ceiling['client_cpu']:.0%}, others {ceiling['foreign_cpu']:.0%}; "
        f"{ceiling['msgs_per_cpu_s']:,.0f} req per server-CPU-second")
    add("")
    columns = [("scenario", 34), ("backlog", 9), ("msgs/s", 8), ("quiet runs", 14), ("p50 ms", 6), ("p99 ms", 7),
               ("of ceiling", 10),
               ("reference", 9), ("vs ref", 6), ("srv CPU", 7), ("client CPU", 10), ("others", 6),
               ("msgs/CPU-s", 10), ("of ceiling/CPU", 14)]
    add("| " + " | ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(columns)) + " |")
    add("|" + "|".join("-" * (w + 2) for _, w in columns) + "|")
    client_bound = []
    for backlog in results["backlogs"]:
        per = results["by_backlog"][str(backlog)]
        for name in ("send1", "send10", "recv10+del", "recv1+del1", "roundtrip10", "light"):
            r = per.get(name)
            if r is None:
                continue
            measured = reference.get(str(backlog), {}).get(name)
            if name == "light":
                ref_p50 = measured["e2e_p50_ms"] if measured else float("nan")
                cells = [LABELS[name], f"{backlog:,}", f"{r['msgs_per_s']:,.0f}", "", f"{r['e2e_p50_ms']:.2f}",
                         f"{r['e2e_p99_ms']:.2f}", "", f"{ref_p50:.2f} ms",
                         f"{ref_p50 / r['e2e_p50_ms']:.2f}x", f"{r['server_cpu']:.0%}",
                         f"{r['client_cpu']:.0%}", f"{r['foreign_cpu']:.0%}", "", ""]
            else:
                ref = measured["msgs_per_s"] if measured else float("nan")
                per_request = MSGS_PER_REQUEST[name]
                p50, p99 = (r["e2e_p50_ms"], r["e2e_p99_ms"]) if name == "roundtrip10" else (r["p50_ms"], r["p99_ms"])
                quiet = (f"{r['quiet_msgs_per_s']:,.0f} ({r['quiet_runs']}/{len(r['msgs_per_s_all'])})"
                         if r["quiet_runs"] else f"- (0/{len(r['msgs_per_s_all'])})")
                cells = [LABELS[name], f"{backlog:,}", f"{r['msgs_per_s']:,.0f}", quiet, f"{p50:.2f}", f"{p99:.2f}",
                         f"{r['msgs_per_s'] / (ceiling['req_per_s'] * per_request):.2f}", f"{ref:,.0f}",
                         f"{r['msgs_per_s'] / ref:.2f}x", f"{r['server_cpu']:.0%}", f"{r['client_cpu']:.0%}",
                         f"{r['foreign_cpu']:.0%}", f"{r['msgs_per_cpu_s']:,.0f}",
                         f"{r['msgs_per_cpu_s'] / (ceiling['msgs_per_cpu_s'] * per_request):.2f}"]
            add("| " + " | ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}"
                                  for i, (c, (_, w)) in enumerate(zip(cells, columns))) + " |")
            if r["client_cpu"] > 0.85:
                client_bound.append(f"{name} at {backlog:,}")
    add("")
    add("reference: scripts/bench/reference_server.py (this design with none of SQS's checks), measured in this run "
        "with the same client (light load: its end-to-end p50).")
    add("p50/p99: per HTTP request; for the round trip and the light load: end to end, send issued -> receive answered.")
    add("of ceiling: msgs/s / (ceiling req/s x messages per request: 1, 10, 5, 0.5, 10/3).")
    add("quiet runs: median msgs/s of the runs during which other processes used <= "
        f"{quiet_threshold:.0%} of a core (how many of the runs that was).")
    add("srv CPU: server process, fraction of its one core; others: CPU that other processes on the machine used "
        "meanwhile (median of the runs; above ~15% the figures are disturbed).")
    add("msgs/CPU-s: messages per second of server CPU time (what the server would do with its core to itself, "
        "if CPU-bound); of ceiling/CPU: the same against the ceiling's requests per CPU-second.")
    if len(results["backlogs"]) > 1:
        small, big = results["backlogs"][0], results["backlogs"][-1]
        add("")
        add(f"backlog {big:,} vs {small:,} (target >= 0.8):")
        for name in ("send1", "send10", "recv10+del", "recv1+del1", "roundtrip10"):
            a = results["by_backlog"][str(small)].get(name)
            b = results["by_backlog"][str(big)].get(name)
            if a and b:
                add(f"  {LABELS[name]:<34} {b['msgs_per_s'] / a['msgs_per_s']:.2f}")
    for backlog in results["backlogs"]:
        per = results["by_backlog"][str(backlog)]
        idle = per.get("idle_polls")
        if idle:
            add("")
            add(f"idle long polls at backlog {backlog:,}: {idle['polls']} open polls, server CPU "
                f"{idle['idle_cpu_ms']:.0f} ms in {idle['idle_seconds']:.1f} s idle (target: none); "
                f"send -> poller median {idle['wake_ms_median']:.2f} ms (target < {TARGET_WAKE_MS:.0f} ms; runs: "
                f"{', '.join(f'{w:.1f}' for w in idle['wake_ms'])}); server CPU per wake-up "
                f"{median(idle['wake_cpu_ms']):.0f} ms; RSS {idle['rss_mb']:.0f} MB "
                f"(target < {TARGET_RSS_MB:.0f} MB), peak RSS {idle['peak_rss_mb']:.0f} MB, depth {idle['depth']:,}")
        details = []
        for name in ("recv10+del", "recv1+del1", "roundtrip10", "light"):
            r = per.get(name)
            if r and r["detail"]:
                parts = ", ".join(f"{a} p50 {v[0]:.2f} / p99 {v[1]:.2f} ms" for a, v in r["detail"].items())
                details.append(f"  {name}: {parts}; server loop thread {r['loop_cpu']:.0%}, other threads "
                               f"{r['other_cpu']:.0%}; depth {r['depth_range'][0]:,}-{r['depth_range'][1]:,}")
        for name in ("send1", "send10"):
            r = per.get(name)
            if r:
                details.append(f"  {name}: server loop thread {r['loop_cpu']:.0%}, other threads {r['other_cpu']:.0%};"
                               f" depth {r['depth_range'][0]:,}-{r['depth_range'][1]:,}; reps {r['msgs_per_s_all']}")
        if details:
            add("")
            add(f"details at backlog {backlog:,}:")
            lines.extend(details)
        reads = per.get("reads")
        if reads:
            add("")
            add(f"reads beside writes at backlog {backlog:,} (queue A holds {reads['depth_a']:,}): SendMessage(1) on "
                f"queue B {reads['polled']['msgs_per_s']:,.0f} msgs/s while A is polled and browsed vs "
                f"{reads['plain']['msgs_per_s']:,.0f} without (medians); median of the paired per-rep ratios "
                f"{reads['ratio']:.3f}x (target >= 0.95; per rep {reads['rep_ratios']}), msgs per server-CPU-second "
                f"{reads['cpu_ratio']:.3f}x; others {reads['plain']['foreign_cpu']:.0%} / "
                f"{reads['polled']['foreign_cpu']:.0%} of a core")
            for action, v in reads["reads"].items():
                target = 20 if action.startswith("GetQueueAttributes") else 30
                add(f"  {action} on A: p50 {v['p50_ms']:.2f} ms, p99 {v['p99_ms']:.2f} ms (target <= {target} ms), "
                    f"max {v['max_ms']:.2f} ms, {v['n']} requests")
            ref_reads = reference.get(str(backlog), {}).get("reads")
            if ref_reads:
                add(f"  reference: paired ratio {ref_reads['ratio']:.3f}x; " + "; ".join(
                    f"{a} p50 {v['p50_ms']:.2f} / p99 {v['p99_ms']:.2f} ms" for a, v in ref_reads["reads"].items()))
        for size in BIG_BODIES:
            name = f"recv10+del {size // 1024}KiB"
            r, ref = per.get(name), reference.get(str(backlog), {}).get(name)
            if r:
                add("")
                add(f"{name} (fresh queue, medians): {r['msgs_per_s']:,.0f} msgs/s, p50 {r['p50_ms']:.2f} / p99 "
                    f"{r['p99_ms']:.2f} ms, msgs per server-CPU-second {r['msgs_per_cpu_s']:,.0f} (per rep "
                    f"{r['msgs_per_s_all']}); reference "
                    + (f"{ref['msgs_per_s']:,.0f} msgs/s = {r['msgs_per_s'] / ref['msgs_per_s']:.2f}x "
                       f"(per rep {ref['msgs_per_s_all']})" if ref else "not measured"))
        fanout = per.get("fanout")
        if fanout:
            base = fanout["0"]["msgs_per_s"]
            add("")
            add(f"send10 by subscriptions at backlog {backlog:,} (fresh queues, medians): " + "; ".join(
                f"{n}: {r['msgs_per_s']:,.0f} msgs/s = {r['msgs_per_s'] / base:.2f}x, msgs per server-CPU-second "
                f"{r['msgs_per_cpu_s']:,.0f} (per rep {r['msgs_per_s_all']})" for n, r in fanout.items()))
        errors = {name: r["errors"] for name, r in per.items() if isinstance(r, dict) and r.get("errors")}
        if errors:
            add(f"  ERRORS at backlog {backlog:,}: {errors}")
    add("")
    if client_bound or ceiling["client_cpu"] > 0.85:
        add("WARNING: the client process used > 85% of its core in: "
            + ", ".join(client_bound + (["the ceiling"] if ceiling["client_cpu"] > 0.85 else []))
            + " - the client may be the bottleneck there.")
    else:
        add(f"client CPU stayed below 85% of its core everywhere (ceiling run: {ceiling['client_cpu']:.0%}): "
            "the server, not the client, is the bottleneck.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/bench report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="JSON files written by `python scripts/bench load`")
    args = parser.parse_args(argv)
    for path in args.results:
        results = json.loads(path.read_text())
        print(f"### {path.name}: {results['server_source']}")
        print(f"\nmachine: {results['machine']}")
        print(report_text(results, QUIET))
    return 0
