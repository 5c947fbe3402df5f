"""Plain counters for the metrics, kept where things happen and read at scrape time.

Recording sits on the hot path (every request, every commit group), so it is an integer
addition and a `bisect` here, not prometheus-client's metric objects: those take a lock per
call. `queueserver/metrics.py` turns these tallies into Prometheus families when /metrics is
scraped. Writers are the event loop (requests, queues) and the database and fsync threads
(their own tallies); a scrape reads ints that the GIL keeps whole.
"""

from __future__ import annotations

from bisect import bisect_left

# Bucket upper bounds (Prometheus `le`): request latency includes long polls (up to 20 s).
LATENCY_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0)
FSYNC_BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
GROUP_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# SQS message sizes: up to 1 MiB.
SIZE_BOUNDS = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)


class Histogram:
    """Observations counted per bucket (not cumulative: the count is their sum, so a scrape
    that races a recording still sees a count equal to its +Inf bucket)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations up to it) in the exposition's order, ending with infinity."""
        pairs, total = [], 0
        for bound, count in zip((*self.bounds, float("inf")), list(self.counts)):
            total += count
            pairs.append((float(bound), total))
        return pairs

    def merge(self, other: "Histogram") -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.sum += other.sum


class QueueTally:
    """One queue's CloudWatch counters: what was sent, received, deleted, and empty receives."""

    __slots__ = ("sent", "received", "deleted", "empty_receives", "dead_lettered", "sizes")

    def __init__(self) -> None:
        self.sent = 0  # messages added (a FIFO duplicate is answered, not added)
        self.received = 0  # messages returned by ReceiveMessage
        self.deleted = 0  # successful deletes, a repeated one too (as CloudWatch counts them)
        self.empty_receives = 0  # ReceiveMessage calls that returned nothing
        self.dead_lettered = 0  # messages moved from this queue to its dead-letter queue
        self.sizes = Histogram(SIZE_BOUNDS)


class StorageTally:
    """The database thread's and the syncer's figures."""

    __slots__ = ("group_sizes", "fsync_seconds", "outages", "last_outage", "failed_fsyncs", "redriven",
                 "readiness_probes")

    def __init__(self) -> None:
        self.group_sizes = Histogram(GROUP_BOUNDS)  # operations per commit group
        self.fsync_seconds = Histogram(FSYNC_BOUNDS)
        self.outages = 0  # storage outages begun (each is logged once)
        self.last_outage: tuple[float, str] | None = None  # when the last one began (epoch seconds) and why
        self.failed_fsyncs = 0
        self.redriven = 0  # messages moved by move tasks
        self.readiness_probes = 0  # writes /ready made to learn whether the database takes writes


class ConnectionTally:
    """Connections of every listener, counted from their accept (http_guard.ConnectionGate)."""

    __slots__ = ("open", "refused", "refused_per_address", "unread_closed")

    def __init__(self) -> None:
        self.open = 0
        self.refused = 0  # refused at once: --max-connections were open, or as many from the same address
        self.refused_per_address = 0  # of those, refused for their address's share
        self.unread_closed = 0  # closed at the write deadline: their client did not read the answer


class RequestTally:
    """Request latency per (action, HTTP status); the status becomes an outcome at scrape time."""

    __slots__ = ("by_action",)

    def __init__(self) -> None:
        self.by_action: dict[tuple[str, int], Histogram] = {}

    def histogram(self, action: str, status: int) -> Histogram:
        """The (action, status) histogram, made on first use (the hot path reads `by_action` itself)."""
        histogram = self.by_action.get((action, status))
        if histogram is None:
            histogram = self.by_action[(action, status)] = Histogram(LATENCY_BOUNDS)
        return histogram
