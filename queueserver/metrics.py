"""GET /metrics: Prometheus families named after CloudWatch's SQS metrics, plus the server's own.

A collector per scrape, no registry (no global state: two servers can run in one process).
Nothing is recorded through prometheus-client: the hot path bumps plain tallies (`tallies.py`),
and a scrape reads them, the read side's count cache (the approximate gauges, never the writer),
the files' sizes and the running move tasks. The counts are awaited first, then a thread sums and
renders that snapshot.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from queueserver.models import Queue, QueueCounts
from queueserver.storage import QueueEngine
from queueserver.replication import ReplicationReport
from queueserver.tallies import ConnectionTally, Histogram, QueueTally, RequestTally
from queueserver.topic_metrics import topic_families

QUEUE_LABELS = ["queue", "region", "account"]
# The queues past the first `metrics_max_queues`, summed: no queue or subscription name has parentheses.
OTHER = "(other)"
OTHER_LABELS = [OTHER, "", ""]
_SUM_CHUNK = 1000  # queues summed in one step
_NO_QUEUE_ID_ABOVE = 2**63 - 1  # SQLite's largest integer: every queue's id is at most this
# (the queue tally's field, the family, its help): per queue, named after CloudWatch's SQS metric.
_QUEUE_COUNTERS = (
    ("sent", "queueserver_messages_sent", "Messages added to the queue (CloudWatch NumberOfMessagesSent)."),
    ("received", "queueserver_messages_received", "Messages returned by ReceiveMessage (NumberOfMessagesReceived)."),
    ("deleted", "queueserver_messages_deleted", "Successful deletes, repeated ones too (NumberOfMessagesDeleted)."),
    ("empty_receives", "queueserver_empty_receives",
     "ReceiveMessage calls that returned no message (NumberOfEmptyReceives)."),
    ("dead_lettered", "queueserver_dead_letter_moves",
     "Messages moved from the queue to its dead-letter queue past maxReceiveCount."),
)
# (the QueueCounts field, the family, its help).
_QUEUE_GAUGES = (
    ("visible", "queueserver_approximate_messages_visible",
     "Messages available for retrieval (ApproximateNumberOfMessagesVisible)."),
    ("in_flight", "queueserver_approximate_messages_not_visible",
     "Messages in flight (ApproximateNumberOfMessagesNotVisible)."),
    ("delayed", "queueserver_approximate_messages_delayed", "Delayed messages (ApproximateNumberOfMessagesDelayed)."),
)


@dataclass
class _Snapshot:
    now_ms: int
    queues: list[Queue]  # the first created, each with series of its own
    counts: dict[int, QueueCounts]
    others_after: int | None  # the id of the last of them when more queues follow (summed as OTHER)
    others_counts: QueueCounts | None
    move_tasks: list[tuple[str, str, str, int, int]]
    other_move_tasks: tuple[int, int, int]  # tasks, moved, to move
    file_sizes: tuple[int, int]
    open_long_polls: int
    connections: tuple[int, int, int, int]  # open, refused, of those for their address, closed unread
    problems: list[str] = field(default_factory=list)
    replication: ReplicationReport | None = None


class _Families(Collector):
    """One snapshot's families, as an encoder reads them (it calls `collect`)."""

    def __init__(self, families: Callable[[], Iterator[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return self._families()


def outcome(status: int) -> str:
    """A request's outcome label from its HTTP status."""
    if status < 400:
        return "success"
    return "client_error" if status < 500 else "server_error"


def _buckets(histogram: Histogram) -> list[tuple[str, float]]:
    return [(floatToGoString(bound), count) for bound, count in histogram.cumulative()]


def _summed(tallies: dict[int, QueueTally], after: int) -> QueueTally:
    """The tallies of the queues whose id is above `after`, added up: column by column in C loops, a
    chunk of queues at a time (a C loop holds the GIL: over 100,000 queues it would hold the event
    loop up for as long). No object is made per queue: at 100,000 queues that many would set off a
    full garbage collection, which holds the event loop up for longer still."""
    others = [tally for queue_id, tally in tallies.items() if queue_id > after]
    total = QueueTally()
    buckets = range(len(total.sizes.counts))
    for start in range(0, len(others), _SUM_CHUNK):
        chunk = others[start:start + _SUM_CHUNK]
        for name, _, _ in _QUEUE_COUNTERS:
            setattr(total, name, getattr(total, name) + sum(map(attrgetter(name), chunk)))
        sizes = [tally.sizes for tally in chunk]
        counts = [histogram.counts for histogram in sizes]
        total.sizes.counts = [total.sizes.counts[b] + sum(map(itemgetter(b), counts)) for b in buckets]
        total.sizes.sum += sum(map(attrgetter("sum"), sizes))
    return total


class Metrics:
    """`await exposition(accept)` -> (body, content type).

    A scrape is the same size at any number of queues: `max_queues` queues (the first created: a
    queue's series stay as queues come and go after it) have series of their own, and every other
    queue is summed into one series per family labelled queue=OTHER, from the in-memory tallies
    and one count on the read side. Summed rather than left out, so that totals and alerts (the
    oldest message's age) still cover every queue. Its snapshot is gathered on the event loop
    (awaits only), and summed and rendered in a thread, so that a scrape never holds other requests
    up for the time a render takes. Concurrent scrapes asking for the same format share one.
    """

    def __init__(self, engine: QueueEngine, requests: RequestTally, connections: ConnectionTally, max_queues: int,
                 replication: Callable[[], ReplicationReport] | None = None,
                 unreadable_policies: Callable[[], int] | None = None) -> None:
        self._engine = engine
        self._unreadable_policies = unreadable_policies  # with credentials on: stored policies found unreadable
        self._connections = connections
        self._replication = replication
        self._observe = engine.observe
        self._requests = requests
        self._max_queues = max(0, max_queues)
        self._scrapes: dict[str, asyncio.Future[bytes]] = {}  # by content type: the scrape under way

    async def exposition(self, accept: str) -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(accept)
        scrape = self._scrapes.get(content_type)
        if scrape is None:
            scrape = self._scrapes[content_type] = asyncio.ensure_future(self._scrape(encoder))
            scrape.add_done_callback(lambda _: self._scrapes.pop(content_type, None))
        return await asyncio.shield(scrape), content_type

    async def _scrape(self, encoder: Callable[[Collector], bytes]) -> bytes:
        snapshot = await self._take_snapshot()
        tallies = self._engine.queue_tallies
        requests = self._requests
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: encoder(_Families(lambda: self._families(snapshot, tallies, requests))))

    async def _take_snapshot(self) -> _Snapshot:
        listed = self._observe.first_created(self._max_queues + 1)
        others_after = None
        if len(listed) > self._max_queues:
            listed.pop()
            others_after = listed[-1].id if listed else 0
        results = await asyncio.gather(*(self._observe.counts(q) for q in listed), return_exceptions=True)
        counts = {q.id: c for q, c in zip(listed, results) if isinstance(c, QueueCounts)}  # a failed count: no gauges
        now_ms = self._engine.clock.now_ms()
        others_counts = None
        if others_after is not None:
            try:
                others_counts = await self._observe.counts_after(others_after, now_ms)
            except Exception:  # noqa: BLE001 - the storage is failing: the other metrics still count
                pass
        try:
            move_tasks, other_move_tasks = await self._observe.running_move_tasks(
                others_after if others_after is not None else _NO_QUEUE_ID_ABOVE)
        except Exception:  # noqa: BLE001 - as above
            move_tasks, other_move_tasks = [], (0, 0, 0)
        return _Snapshot(now_ms, listed, counts, others_after, others_counts, move_tasks, other_move_tasks,
                         self._observe.file_sizes(), self._observe.open_long_polls(),
                         (self._connections.open, self._connections.refused,
                          self._connections.refused_per_address, self._connections.unread_closed), self._observe.known_problems(),
                         None if self._replication is None else self._replication())

    def _families(self, snapshot: _Snapshot, tallies: dict[int, QueueTally],
                  requests: RequestTally) -> Iterator[Metric]:
        """On the render thread, while the event loop may add tallies: a dict is read with get() or
        copied (dict.copy() and list() are steps the GIL keeps whole) before it is walked."""
        yield from self._queue_families(snapshot, tallies)
        yield from topic_families(self._engine.topics, self._max_queues)
        yield from _request_families(list(requests.by_action.items()))
        opened, refused, refused_per_address, unread_closed = snapshot.connections
        yield GaugeMetricFamily("queueserver_connections_open", "Connections open, on every listener, from their "
                                "accept (a TLS one before its handshake).", value=opened)
        yield CounterMetricFamily("queueserver_connections_refused", "Connections refused at once because "
                                  "--max-connections were open, or --max-connections-per-address from their address.",
                                  value=refused)
        yield CounterMetricFamily("queueserver_connections_refused_per_address", "Connections refused at once "
                                  "because --max-connections-per-address were open from their address.",
                                  value=refused_per_address)
        yield CounterMetricFamily("queueserver_connections_unread_closed", "Connections closed because their "
                                  "client did not read an answer within --write-timeout.", value=unread_closed)
        if self._unreadable_policies is not None:
            yield GaugeMetricFamily("queueserver_unreadable_policies", "Stored queue policies this server cannot "
                                    "evaluate (found since the start): each denies every other account.",
                                    value=self._unreadable_policies())
        yield from self._storage_families(snapshot)
        if snapshot.replication is not None:
            yield from _replication_families(snapshot.replication)

    def _queue_families(self, snapshot: _Snapshot, tallies: dict[int, QueueTally]) -> Iterator[Metric]:
        counters = {field: CounterMetricFamily(name, text, labels=QUEUE_LABELS)
                    for field, name, text in _QUEUE_COUNTERS}
        sizes = HistogramMetricFamily("queueserver_sent_message_size_bytes", "Size of the messages added to the "
                                      "queue, body and attributes (SentMessageSize).", labels=QUEUE_LABELS)
        gauges = {field: GaugeMetricFamily(name, text, labels=QUEUE_LABELS) for field, name, text in _QUEUE_GAUGES}
        age = GaugeMetricFamily("queueserver_approximate_age_of_oldest_message_seconds", "Age of the oldest "
                                "message in the queue, in any state (ApproximateAgeOfOldestMessage).",
                                labels=QUEUE_LABELS)
        series = [([q.name, q.region, q.account], tallies.get(q.id), snapshot.counts.get(q.id))
                  for q in snapshot.queues]
        if snapshot.others_after is not None:
            series.append((OTHER_LABELS, _summed(tallies.copy(), snapshot.others_after),
                           snapshot.others_counts))
        for labels, tally, counts in series:
            if tally is not None:
                for name, family in counters.items():
                    family.add_metric(labels, getattr(tally, name))
                sizes.add_metric(labels, _buckets(tally.sizes), tally.sizes.sum)
            else:  # a queue nothing happened to yet (or since a restart): zeros, so that rates start at once
                for family in counters.values():
                    family.add_metric(labels, 0)
                sizes.add_metric(labels, [("+Inf", 0)], 0)
            if counts is not None:
                for name, family in gauges.items():
                    family.add_metric(labels, getattr(counts, name))
                oldest = counts.oldest_enqueued_at_ms
                age.add_metric(labels, 0 if oldest is None else max(0, snapshot.now_ms - oldest) / 1000)
        yield from counters.values()
        yield sizes
        yield from gauges.values()
        yield age

    def _storage_families(self, snapshot: _Snapshot) -> Iterator[Metric]:
        storage = self._observe.storage
        groups = HistogramMetricFamily("queueserver_commit_group_operations", "Operations committed together in "
                                       "one transaction (group commit).")
        groups.add_metric([], _buckets(storage.group_sizes), storage.group_sizes.sum)
        fsync = HistogramMetricFamily("queueserver_fsync_duration_seconds", "Time to sync the write-ahead log.")
        fsync.add_metric([], _buckets(storage.fsync_seconds), storage.fsync_seconds.sum)
        yield groups
        yield fsync
        yield CounterMetricFamily("queueserver_fsync_failures", "Failed syncs of the write-ahead log (each stops "
                                  "writes until a restart).", value=storage.failed_fsyncs)
        yield CounterMetricFamily("queueserver_readiness_probes", "Probe writes made for GET /ready (at most one "
                                  "a second, however often it is asked).", value=storage.readiness_probes)
        yield CounterMetricFamily("queueserver_storage_outages", "Storage outages begun (full or read-only disk, "
                                  "a lock held by another process, I/O errors).", value=storage.outages)
        yield GaugeMetricFamily("queueserver_ready", "1 when the database takes writes and every background task "
                                "runs (as GET /ready, without its probe).", value=0 if snapshot.problems else 1)
        database, wal = snapshot.file_sizes
        yield GaugeMetricFamily("queueserver_database_size_bytes", "Size of the database file.", value=database)
        yield GaugeMetricFamily("queueserver_wal_size_bytes", "Size of the write-ahead log file.", value=wal)
        yield GaugeMetricFamily("queueserver_open_long_polls", "ReceiveMessage calls waiting for messages.",
                                value=snapshot.open_long_polls)
        yield CounterMetricFamily("queueserver_move_task_messages_moved", "Messages moved by message move tasks "
                                  "since the start.", value=storage.redriven)
        other_tasks, other_moved, other_to_move = snapshot.other_move_tasks
        yield GaugeMetricFamily("queueserver_move_tasks_running", "Message move tasks under way.",
                                value=len(snapshot.move_tasks) + other_tasks)
        moved = GaugeMetricFamily("queueserver_move_task_progress_moved", "Messages a running move task has moved.",
                                  labels=QUEUE_LABELS)
        to_move = GaugeMetricFamily("queueserver_move_task_progress_total", "Messages a running move task set out "
                                    "to move.", labels=QUEUE_LABELS)
        for region, account, name, done, total in snapshot.move_tasks:
            moved.add_metric([name, region, account], done)
            to_move.add_metric([name, region, account], total)
        if other_tasks:
            moved.add_metric(OTHER_LABELS, other_moved)
            to_move.add_metric(OTHER_LABELS, other_to_move)
        yield moved
        yield to_move


def _request_families(by_action: list[tuple[tuple[str, int], Histogram]]) -> Iterator[Metric]:
    merged: dict[tuple[str, str], Histogram] = {}
    for (action, status), histogram in by_action:
        key = (action, outcome(status))
        if key not in merged:
            merged[key] = Histogram(histogram.bounds)
        merged[key].merge(histogram)
    requests = CounterMetricFamily("queueserver_requests", "Requests by action and outcome (success, "
                                   "client_error, server_error).", labels=["action", "outcome"])
    latency = HistogramMetricFamily("queueserver_request_duration_seconds", "Time from a request's first "
                                    "byte to its answer, long polls included.", labels=["action", "outcome"])
    for (action, result), histogram in sorted(merged.items()):
        buckets = _buckets(histogram)
        requests.add_metric([action, result], buckets[-1][1])
        latency.add_metric([action, result], buckets, histogram.sum)
    yield requests
    yield latency


def _replication_families(report: ReplicationReport) -> Iterator[Metric]:
    """Only with --replicate (or a standby): the role, the generation, how far behind the replica (or the
    standby's copy) is (replication/status.py and follower.py say how it is read)."""
    role = GaugeMetricFamily("queueserver_role", "1 for the role this server has now: primary (writes, "
                             "replicates) or standby (follows the replica, read-only).", labels=["role"])
    role.add_metric([report.role], 1)
    yield role
    yield GaugeMetricFamily("queueserver_replication_generation", "The replica generation this server writes "
                            "(primary) or follows (standby); a promotion writes the next one.",
                            value=report.generation)
    yield GaugeMetricFamily("queueserver_replication_up", "1 while Litestream runs beside the server.",
                            value=1 if report.running else 0)
    if report.lag_seconds is not None:
        yield GaugeMetricFamily("queueserver_replication_lag_seconds", "Age of the oldest change Litestream read "
                                "from the WAL that the replica lacks (0: it has them all).",
                                value=report.lag_seconds)
    if report.transactions_behind is not None:
        yield GaugeMetricFamily("queueserver_replication_transactions_behind", "Litestream transactions (one "
                                "read of the WAL, about a second of writes) not yet in the replica.",
                                value=report.transactions_behind)
    yield CounterMetricFamily("queueserver_replication_restarts", "Times Litestream exited and was restarted.",
                              value=report.restarts)
    yield CounterMetricFamily("queueserver_replication_errors", "Errors and warnings Litestream logged, and its "
                              "exits.", value=report.errors)
    if report.last_error is not None:
        yield GaugeMetricFamily("queueserver_replication_last_error_timestamp_seconds", "When the last "
                                "replication error was logged (the message: GET /ready).",
                                value=report.last_error[0])


def standby_exposition(report: ReplicationReport, accept: str) -> tuple[bytes, str]:
    """/metrics of a standby, which has no database open: its role, generation and lag only."""
    encoder, content_type = choose_encoder(accept)
    return encoder(_Families(lambda: _replication_families(report))), content_type
