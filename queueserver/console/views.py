"""What the console's pages show, gathered from memory and the read side (never the writer).

Counts come from the engine's count cache (the read side, at most a couple of seconds stale, as
SQS's approximate counts are); the oldest message from a one-row browse; rates from the engine's
in-memory per-minute counters.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import queueserver
from queueserver.models import SUBSCRIPTION_SEPARATOR, Queue
from queueserver.replication import ReplicationReport
from queueserver.storage import QueueEngine
from queueserver.tallies import Histogram

SPARK_WIDTH, SPARK_HEIGHT = 90, 20


@dataclass
class QueueRow:
    queue: Queue
    kind: str  # standard, FIFO or fair
    visible: int
    in_flight: int
    delayed: int
    oldest_age_s: int | None
    sent: list[int]
    received: list[int]
    dead_letter_arn: str | None
    sent_per_minute: int
    received_per_minute: int
    sources: list[Queue] = field(default_factory=list)
    subscriptions: list["QueueRow"] = field(default_factory=list)

    @property
    def subscription_name(self) -> str | None:
        """The subscription's own name (after the queue's and the separator); None for a queue."""
        parent = self.queue.subscribed_to
        return None if parent is None else self.queue.name[len(parent) + len(SUBSCRIPTION_SEPARATOR):]


def _last_60_seconds(series: list[int], now_ms: int) -> int:
    """The count of the last 60 s, estimated from minute buckets: this minute's, plus the part of the
    previous minute's still inside the window (spread evenly over that minute)."""
    past = 1 - (now_ms % 60_000) / 60_000
    return round(series[-1] + (series[-2] if len(series) > 1 else 0) * past)


def sparkline(values: list[int]) -> str:
    """The points of an SVG polyline for `values` (scaled to the box; all zeros is a flat line)."""
    top = max(values, default=0) or 1
    step = SPARK_WIDTH / max(len(values) - 1, 1)
    return " ".join(f"{i * step:.1f},{SPARK_HEIGHT - 1 - (v / top) * (SPARK_HEIGHT - 2):.1f}"
                    for i, v in enumerate(values))


def dead_letter_arn(queue: Queue) -> str | None:
    policy = queue.attributes.get("RedrivePolicy")
    if not policy:
        return None
    try:
        return json.loads(policy).get("deadLetterTargetArn")
    except (ValueError, AttributeError):
        return None


async def queue_row(engine: QueueEngine, queue: Queue) -> QueueRow:
    counts = await engine.queue_counts(queue)
    now = engine.clock.now_ms()
    first = await engine.browse_messages(queue, after=0, limit=1)
    oldest = max(0, (now - first[0].sent_at_ms) // 1000) if first else None
    kind = "FIFO" if queue.fifo else "fair" if first and first[0].group_id else "standard"
    sent, received = engine.traffic_per_minute(queue, now)
    return QueueRow(queue, kind, counts.visible, counts.in_flight, counts.delayed, oldest, sent, received,
                    dead_letter_arn(queue), _last_60_seconds(sent, now), _last_60_seconds(received, now))


async def overview(engine: QueueEngine, name_filter: str, sort: str, descending: bool,
                   visible: Callable[[Queue], bool]) -> list[QueueRow]:
    """The queues `visible` lets through whose name matches, sorted; each with its subscriptions (by name)
    under it rather than among the queues."""
    wanted = name_filter.lower()
    queues = [q for q in engine.all_queues() if wanted in (q.subscribed_to or q.name).lower() and visible(q)]
    every = [await queue_row(engine, q) for q in queues]
    by_arn = {row.queue.arn: row for row in every}
    for row in every:
        if row.dead_letter_arn in by_arn:
            by_arn[row.dead_letter_arn].sources.append(row.queue)
    rows = [row for row in every if row.queue.subscribed_to is None]
    by_key = {row.queue.key: row for row in rows}
    for row in every:  # all_queues() is sorted by name: subscriptions come in name order
        parent = row.queue.subscribed_to
        if parent is not None and (row.queue.region, row.queue.account, parent) in by_key:
            by_key[(row.queue.region, row.queue.account, parent)].subscriptions.append(row)
    keys = {
        "name": lambda r: (r.queue.name, r.queue.region),
        "region": lambda r: (r.queue.region, r.queue.name),
        "type": lambda r: (r.kind, r.queue.name),
        "visible": lambda r: r.visible, "in_flight": lambda r: r.in_flight, "delayed": lambda r: r.delayed,
        "oldest": lambda r: r.oldest_age_s or 0,
        "sent": lambda r: r.sent_per_minute, "received": lambda r: r.received_per_minute,
    }
    rows.sort(key=keys.get(sort, keys["name"]), reverse=descending)
    return rows


@dataclass
class Fsync:
    """fsync latency over a window: how many, and the bucket bounds holding the median and the 99th percentile."""

    window: str  # "the last 5 min" or "since the start"
    syncs: int
    p50: str
    p99: str


def _percentile(bounds: tuple[float, ...], counts: list[int], fraction: float) -> str:
    """The upper bound of the bucket holding that fraction of the observations (a histogram knows no more)."""
    total = sum(counts)
    if not total:
        return "–"
    running = 0
    for bound, count in zip(bounds, counts):
        running += count
        if running >= fraction * total:
            return f"≤ {bound * 1000:g} ms"
    return f"> {bounds[-1] * 1000:g} ms"


class FsyncWindow:
    """Snapshots of the cumulative fsync histogram, one a minute at most, taken when a console page is served,
    so that the server page can show the latency of the last minutes rather than since the start."""

    KEEP_S = 15 * 60

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._snapshots: list[tuple[float, list[int]]] = []

    def note(self, histogram: Histogram) -> None:
        now = self._monotonic()
        if not self._snapshots or now - self._snapshots[-1][0] >= 60:
            self._snapshots.append((now, list(histogram.counts)))
            self._snapshots = [s for s in self._snapshots if now - s[0] <= self.KEEP_S]

    def latency(self, histogram: Histogram) -> Fsync:
        self.note(histogram)
        now, counts = self._monotonic(), list(histogram.counts)
        oldest = next((s for s in self._snapshots if now - s[0] >= 60), None)  # a window of a minute at least
        window = "since the start"
        if oldest is not None:
            counts = [a - b for a, b in zip(counts, oldest[1])]
            window = f"the last {round((now - oldest[0]) / 60)} min"
        return Fsync(window, sum(counts), _percentile(histogram.bounds, counts, 0.5),
                     _percentile(histogram.bounds, counts, 0.99))


@dataclass
class ServerInfo:
    version: str
    database: str
    size_bytes: int | None
    wal_bytes: int | None
    uptime_s: int
    healthy: bool
    problems: list[str]
    queues: int
    fsync: Fsync
    fsync_failures: int
    outages: int
    last_outage: tuple[str, str] | None  # when (UTC) and why


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def server_info(engine: QueueEngine, db_path: str, started: float, fsync: FsyncWindow) -> ServerInfo:
    path = os.path.realpath(db_path)
    storage = engine.observe.storage
    last = storage.last_outage
    return ServerInfo(queueserver.__version__, path, _size(path), _size(path + "-wal"),
                      int(time.monotonic() - started), not engine.observe.known_problems(),
                      engine.observe.known_problems(), len(engine.all_queues()),
                      fsync.latency(storage.fsync_seconds), storage.failed_fsyncs, storage.outages,
                      None if last is None else (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(last[0])), last[1]))


def message_view(message: dict[str, Any]) -> dict[str, Any]:
    """A browsed message (QueueserverBrowseMessages' shape) as the queue page lists it."""
    attributes = message.get("Attributes", {})
    return {"id": message["MessageId"], "body": message["Body"], "state": message.get("State", ""),
            "receive_count": attributes.get("ApproximateReceiveCount", "0"),
            "group": attributes.get("MessageGroupId", ""),
            "sent": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(attributes.get("SentTimestamp", "0")) / 1000)),
            "attributes": {name: value.get("StringValue", value.get("BinaryValue", ""))
                           for name, value in message.get("MessageAttributes", {}).items()},
            "system": attributes}


def replication_view(report: ReplicationReport) -> dict[str, Any]:
    """The replication row of the server page: the /ready figures, the last error's time in UTC."""
    shown = report.as_dict()
    if report.last_error is not None:
        shown["last_error"] = (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(report.last_error[0])),
                               report.last_error[1])
    return shown
