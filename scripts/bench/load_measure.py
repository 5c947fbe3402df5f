"""Measuring and summarizing one repetition of a `python scripts/bench load` scenario.

The workers of a repetition count into a `Tally`; a `Meter` reads the wall time, the server's CPU
(event-loop thread and other threads, from /proc), this client's CPU and what other processes on the
machine used meanwhile; `make_rep` turns the two into a `Rep`, and `summarize` gives the medians of a
scenario's repetitions (and of its quiet ones apart: on a shared machine other load takes the server's core).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any, Self

from bench.servers import CLK_TCK, Proc

QUIET = 0.15  # a run is "quiet" when other processes used at most this much of a core (the default of --quiet)


def pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


@dataclass
class Tally:
    """What the workers of one run collect."""
    msgs: int = 0
    requests: int = 0
    errors: int = 0
    first_error: str = ""
    lat: list[float] = field(default_factory=list)        # per HTTP request, seconds
    lat_by: dict[str, list[float]] = field(default_factory=dict)
    e2e: list[float] = field(default_factory=list)        # end to end, seconds

    def error(self, text: str) -> None:
        self.errors += 1
        if not self.first_error:
            self.first_error = text[:300]


@dataclass
class Rep:
    msgs_per_s: float
    req_per_s: float
    p50_ms: float
    p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    server_cpu: float    # fraction of one core
    loop_cpu: float
    other_cpu: float
    client_cpu: float
    foreign_cpu: float  # other processes on the machine, fraction of one core
    msgs_per_cpu_s: float  # messages per second of server CPU: what one whole core would give
    errors: int
    first_error: str
    seconds: float
    depth_start: int
    depth_end: int
    detail: dict[str, tuple[float, float]]  # action -> (p50 ms, p99 ms)


def machine_busy() -> tuple[float, float]:
    """(busy CPU seconds of all cores, stolen seconds) from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / CLK_TCK, steal / CLK_TCK


class Meter:
    """Wall time, server CPU (per thread group), this process's CPU, and what the rest of the
    machine used meanwhile (other processes on this shared machine disturb the figures)."""

    def __init__(self, server: Proc) -> None:
        self.server = server

    def __enter__(self) -> Self:
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()
        self.s0 = self.server.thread_cpu()
        self.m0 = machine_busy()
        self.stopped = False
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.stopped:
            self.stop()

    async def stop_at(self, deadline: float) -> None:
        """Stop measuring at the deadline (long polls may still run on for a moment)."""
        await asyncio.sleep(max(0.0, deadline - time.perf_counter()))
        self.stop()

    def stop(self) -> None:
        self.stopped = True
        self.wall = time.perf_counter() - self.t0
        client = time.process_time() - self.c0
        self.client = client / self.wall
        s1 = self.server.thread_cpu()
        m1 = machine_busy()
        self.loop = (s1["loop"] - self.s0["loop"]) / self.wall
        self.other = (s1["other"] - self.s0["other"]) / self.wall
        server = s1["loop"] + s1["other"] - self.s0["loop"] - self.s0["other"]
        self.foreign = max(0.0, (m1[0] - self.m0[0]) - server - client) / self.wall
        self.steal = (m1[1] - self.m0[1]) / self.wall


async def wait_quiet(server: Proc, threshold: float, max_wait: float) -> None:
    """Wait (up to max_wait s) until the rest of the machine uses under `threshold` of a core:
    this machine is shared, and a test suite running beside the benchmark halves its figures."""
    started = time.perf_counter()
    announced = False
    while True:
        m = Meter(server)
        with m:
            await asyncio.sleep(0.5)
        if m.foreign + m.steal < threshold:
            return
        if time.perf_counter() - started > max_wait:
            print(f"      (other processes still use {m.foreign + m.steal:.0%} of a core; measuring anyway)", flush=True)
            return
        if not announced:
            print(f"      (waiting for the machine to quiet down: other processes use {m.foreign + m.steal:.0%})",
                  flush=True)
            announced = True


def make_rep(t: Tally, m: Meter, wall: float, depth_start: int, depth_end: int) -> Rep:
    lat = sorted(t.lat)
    e2e = sorted(t.e2e)
    detail = {}
    for action, values in t.lat_by.items():
        values.sort()
        detail[action] = (pct(values, 0.5) * 1e3, pct(values, 0.99) * 1e3)
    return Rep(
        msgs_per_s=t.msgs / wall, req_per_s=t.requests / wall,
        p50_ms=pct(lat, 0.5) * 1e3, p99_ms=pct(lat, 0.99) * 1e3,
        e2e_p50_ms=pct(e2e, 0.5) * 1e3, e2e_p99_ms=pct(e2e, 0.99) * 1e3,
        server_cpu=m.loop + m.other, loop_cpu=m.loop, other_cpu=m.other, client_cpu=m.client,
        foreign_cpu=m.foreign + m.steal,
        msgs_per_cpu_s=t.msgs / ((m.loop + m.other) * m.wall) if m.loop + m.other > 0 else float("nan"),
        errors=t.errors, first_error=t.first_error, seconds=wall,
        depth_start=depth_start, depth_end=depth_end, detail=detail,
    )


def median(values: list[float]) -> float:
    values = sorted(v for v in values if not math.isnan(v))
    if not values:
        return float("nan")
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def summarize(reps: list[Rep], quiet_threshold: float) -> dict[str, Any]:
    """Medians of the repetitions; `quiet_threshold` (--quiet) picks the quiet ones, reported apart."""
    keys = ["msgs_per_s", "req_per_s", "p50_ms", "p99_ms", "e2e_p50_ms", "e2e_p99_ms", "server_cpu",
            "loop_cpu", "other_cpu", "client_cpu", "foreign_cpu",
            "msgs_per_cpu_s"]
    out: dict[str, Any] = {k: median([getattr(r, k) for r in reps]) for k in keys}
    out["errors"] = sum(r.errors for r in reps)
    out["first_error"] = next((r.first_error for r in reps if r.first_error), "")
    out["depth_range"] = (min(min(r.depth_start, r.depth_end) for r in reps),
                          max(max(r.depth_start, r.depth_end) for r in reps))
    actions = {a for r in reps for a in r.detail}
    out["detail"] = {a: (median([r.detail[a][0] for r in reps if a in r.detail]),
                         median([r.detail[a][1] for r in reps if a in r.detail])) for a in sorted(actions)}
    out["msgs_per_s_all"] = [round(r.msgs_per_s) for r in reps]
    out["others_all"] = [round(r.foreign_cpu, 2) for r in reps]
    quiet = [r for r in reps if r.foreign_cpu <= quiet_threshold]
    out["quiet_runs"] = len(quiet)
    out["quiet_msgs_per_s"] = median([r.msgs_per_s for r in quiet]) if quiet else float("nan")
    return out
