"""Compare two sets of `python scripts/bench load --json` results: per scenario, the median over runs of each run's
median msgs/s and msgs per server-CPU-second, and B's ratio to A (plus the ratio of the medians of
every repetition). Runs of A and B taken interleaved on a quiet machine are what this is for.

Usage: .venv/bin/python scripts/bench compare 'results/A-*.json' 'results/B-*.json'
"""

from __future__ import annotations

import glob
import json
import statistics
import sys


def load(pattern: str) -> tuple[dict[str, dict[str, list[float]]], int]:
    out: dict[str, dict[str, list[float]]] = {}
    files = sorted(glob.glob(pattern))
    for name in files:
        with open(name) as f:
            document = json.load(f)
        for scenarios in document["by_backlog"].values():
            for scenario, result in scenarios.items():
                if not isinstance(result, dict) or "msgs_per_s" not in result:
                    continue
                entry = out.setdefault(scenario, {"rate": [], "per_cpu": [], "reps": []})
                entry["rate"].append(result["msgs_per_s"])
                entry["per_cpu"].append(result["msgs_per_cpu_s"])
                entry["reps"] += result.get("msgs_per_s_all", [])
    return out, len(files)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0].startswith("-"):
        print(__doc__)
        return 0 if args and args[0] in ("-h", "--help") else 2
    a_pattern, b_pattern = args
    (a, a_runs), (b, b_runs) = load(a_pattern), load(b_pattern)
    print(f"A = {a_pattern} ({a_runs} runs), B = {b_pattern} ({b_runs} runs)")
    print(f"{'scenario':12} {'A msgs/s':>10} {'B msgs/s':>10} {'B/A':>6} | {'A msg/CPU-s':>11} {'B msg/CPU-s':>11} "
          f"{'B/A':>6} | every rep B/A")
    for scenario in a:
        if scenario not in b:
            continue
        rate_a, rate_b = statistics.median(a[scenario]["rate"]), statistics.median(b[scenario]["rate"])
        cpu_a, cpu_b = statistics.median(a[scenario]["per_cpu"]), statistics.median(b[scenario]["per_cpu"])
        reps = (statistics.median(b[scenario]["reps"]) / statistics.median(a[scenario]["reps"])
                if a[scenario]["reps"] and b[scenario]["reps"] else float("nan"))
        print(f"{scenario:12} {rate_a:10,.0f} {rate_b:10,.0f} {rate_b / rate_a:6.3f} | {cpu_a:11,.0f} {cpu_b:11,.0f} "
              f"{cpu_b / cpu_a:6.3f} | {reps:.3f}")
    return 0
