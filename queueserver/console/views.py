"""What the console's pages show, gathered from memory and the read side (never the writer).

Counts come from the engine's count cache (the read side, at most a couple of seconds stale, as
SQS's approximate counts are); the oldest message from a one-row browse; rates from the engine's
in-memory per-minute counters. The overview shows a page of queues at a time, found in the engine's
name order, so that a page costs the same at any number of queues.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Callable

import queueserver
from queueserver.models import SUBSCRIPTION_SEPARATOR, Queue
from queueserver.replication import ReplicationReport
from queueserver.storage import QueueEngine
from queueserver.tallies import Histogram

SPARK_WIDTH, SPARK_HEIGHT = 90, 20
# The overview's bounds: what a page costs does not grow with the number of queues.
PAGE = 100  # queues a page, ListQueues' page
SCAN = 10 * PAGE  # queues looked at for a page at most
SUBSCRIPTIONS_SHOWN = 10  # under each queue; its page lists them all
SOURCES_SHOWN = 10  # "DLQ of …"
# Queue attributes that SQS gives in epoch seconds; the console shows them as dates.
_SECONDS_ATTRIBUTES = ("CreatedTimestamp", "LastModifiedTimestamp")


def utc(epoch_ms: int | float | str) -> str:
    """An instant as a person reads it: `2026-05-01 12:00:00 UTC`."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(int(epoch_ms) / 1000))


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
    sources: list[Queue] = field(default_factory=list)  # the first SOURCES_SHOWN
    more_sources: str = "0"  # how many more ("990+": more than SCAN in all)
    subscriptions: list["QueueRow"] = field(default_factory=list)  # the first SUBSCRIPTIONS_SHOWN
    subscription_count: int = 0

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


@dataclass
class OverviewPage:
    """A page of the overview: its rows, and where the pages before and after it start (None: none)."""

    rows: list[QueueRow]
    before: str | None  # the Previous link's `before`
    after: str | None  # the Next link's `after`


def page_token(queue: Queue) -> str:
    """Where a page starts or ends: region/account/name, as in a queue page's path (none of them has a "/")."""
    return f"{queue.region}/{queue.account}/{queue.name}"


def _position(token: str) -> tuple[str, str, str] | None:
    """A page token as the overview's order has it: (name, region, account); None if it is not one."""
    parts = token.split("/")
    return (parts[2], parts[0], parts[1]) if len(parts) == 3 and all(parts) else None


class PageTokens:
    """The overview's Previous/Next tokens, which never name a queue the viewer may not see.

    A page ends at the last queue looked at, which may be one the viewer may not see: such a boundary is
    given an opaque handle kept here (the latest HANDLES_KEPT; an older one starts from the first page).
    """

    HANDLES_KEPT = 4096

    def __init__(self) -> None:
        self._handles: OrderedDict[str, tuple[str, str, str]] = OrderedDict()

    def token(self, queue: Queue, visible: Callable[[Queue], bool]) -> str:
        if visible(queue):
            return page_token(queue)
        handle = "~" + secrets.token_urlsafe(12)  # "~" starts no page_token (a region never does)
        self._handles[handle] = (queue.name, queue.region, queue.account)
        if len(self._handles) > self.HANDLES_KEPT:
            self._handles.popitem(last=False)
        return handle

    def position(self, token: str) -> tuple[str, str, str] | None:
        return self._handles.get(token) if token.startswith("~") else _position(token)


def _window(engine: QueueEngine, tokens: PageTokens, prefix: str, after: str, before: str,
            visible: Callable[[Queue], bool]) -> tuple[list[Queue], str | None, str | None]:
    """The page's queues in name order, and the tokens of the pages before and after it. It looks at
    SCAN queues at most (a viewer who may see few of them gets shorter pages, not slower ones), without
    an await: the engine's order does not change meanwhile."""
    floor = (prefix, "", "")  # before every queue whose name starts with the prefix (no region is "")
    back = tokens.position(before) if before else None
    forward = back is None
    start = back if back is not None else max(tokens.position(after) or floor, floor)
    shown: list[Queue] = []
    looked_at: list[Queue] = []
    more = False
    for queue in engine.queues_by_name(start, forward=forward):
        if not queue.name.startswith(prefix):
            break
        if len(shown) == PAGE or len(looked_at) == SCAN:
            more = True
            break
        looked_at.append(queue)
        if visible(queue):
            shown.append(queue)
    if not looked_at:
        return [], None, None
    if not forward:
        shown.reverse()
        looked_at.reverse()
    first, last = looked_at[0], looked_at[-1]
    earlier = (start != floor and _continues(engine, prefix, first, forward=False)) if forward else more
    later = more if forward else _continues(engine, prefix, last, forward=True)
    return (shown, tokens.token(first, visible) if earlier else None,
            tokens.token(last, visible) if later else None)


def _continues(engine: QueueEngine, prefix: str, queue: Queue, *, forward: bool) -> bool:
    """Whether a queue whose name starts with `prefix` comes right after `queue` (or right before it)."""
    beside = islice(engine.queues_by_name((queue.name, queue.region, queue.account), forward=forward), 1)
    return any(q.name.startswith(prefix) for q in beside)


async def overview(engine: QueueEngine, tokens: PageTokens, prefix: str, after: str, before: str, sort: str,
                   descending: bool, visible: Callable[[Queue], bool]) -> OverviewPage:
    """A page of the queues `visible` lets through whose name starts with `prefix`, in name order after the
    page token `after` (or before `before`), then sorted by `sort`; each with its subscriptions (by name)
    under it rather than among the queues, and the queues whose dead-letter queue it is."""
    queues, earlier, later = _window(engine, tokens, prefix, after, before, visible)
    rows = list(await asyncio.gather(*(queue_row(engine, q) for q in queues)))
    for row in rows:
        subscriptions = [s for s in engine.list_subscriptions(row.queue) if visible(s)]
        row.subscription_count = len(subscriptions)
        row.subscriptions = list(await asyncio.gather(*(queue_row(engine, s)
                                                        for s in subscriptions[:SUBSCRIPTIONS_SHOWN])))
        sources, every = engine.dead_letter_sources(row.queue, SCAN)
        sources = [q for q in sources if visible(q)]
        row.sources = sources[:SOURCES_SHOWN]
        row.more_sources = f"{len(sources) - len(row.sources)}{'+' if every > SCAN else ''}"
    keys = {
        "name": lambda r: (r.queue.name, r.queue.region),
        "region": lambda r: (r.queue.region, r.queue.name),
        "type": lambda r: (r.kind, r.queue.name),
        "visible": lambda r: r.visible, "in_flight": lambda r: r.in_flight, "delayed": lambda r: r.delayed,
        "oldest": lambda r: r.oldest_age_s or 0,
        "sent": lambda r: r.sent_per_minute, "received": lambda r: r.received_per_minute,
    }
    rows.sort(key=keys.get(sort, keys["name"]), reverse=descending)
    return OverviewPage(rows, earlier, later)


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
                      engine.observe.known_problems(), engine.queue_count(),
                      fsync.latency(storage.fsync_seconds), storage.failed_fsyncs, storage.outages,
                      None if last is None else (utc(last[0] * 1000), last[1]))


def attributes_view(attributes: dict[str, str]) -> dict[str, str]:
    """A queue's attributes as its page lists them: the timestamps as dates."""
    return {name: utc(int(value) * 1000) if name in _SECONDS_ATTRIBUTES and value.isdigit() else value
            for name, value in attributes.items()}


def task_view(task: dict[str, Any]) -> dict[str, Any]:
    """A message move task (ListMessageMoveTasks' shape) as the queue page lists it: its start as a date."""
    return {**task, "Started": utc(task["StartedTimestamp"]) if "StartedTimestamp" in task else ""}


def message_view(message: dict[str, Any]) -> dict[str, Any]:
    """A browsed message (QueueserverBrowseMessages' shape) as the queue page lists it."""
    attributes = message.get("Attributes", {})
    return {"id": message["MessageId"], "body": message["Body"], "state": message.get("State", ""),
            "receive_count": attributes.get("ApproximateReceiveCount", "0"),
            "group": attributes.get("MessageGroupId", ""),
            "sent": utc(attributes.get("SentTimestamp", "0")),
            "attributes": {name: value.get("StringValue", value.get("BinaryValue", ""))
                           for name, value in message.get("MessageAttributes", {}).items()},
            "system": attributes}


def replication_view(report: ReplicationReport) -> dict[str, Any]:
    """The replication row of the server page: the /ready figures, the last error's time in UTC."""
    shown = report.as_dict()
    if report.last_error is not None:
        shown["last_error"] = (utc(report.last_error[0] * 1000), report.last_error[1])
    return shown
