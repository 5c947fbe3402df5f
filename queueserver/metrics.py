"""GET /metrics: Prometheus families named after CloudWatch's SQS metrics, plus the server's own.

A custom collector on a registry of this app's own (no global registry: two servers can run in
one process). Nothing is recorded through prometheus-client: the hot path bumps plain tallies
(`tallies.py`), and a scrape reads them, the read side's count cache (the approximate gauges,
never the writer), the files' sizes and the running move tasks. The counts are awaited first,
then the registry renders that snapshot synchronously.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString

from queueserver.models import Queue, QueueCounts
from queueserver.replication import ReplicationReport
from queueserver.storage import QueueEngine
from queueserver.tallies import ConnectionTally, Histogram, RequestTally

QUEUE_LABELS = ["queue", "region", "account"]
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
    queues: list[Queue]
    counts: dict[int, QueueCounts]
    move_tasks: list[tuple[str, str, str, int, int]]
    file_sizes: tuple[int, int]
    open_long_polls: int
    problems: list[str] = field(default_factory=list)
    replication: ReplicationReport | None = None


def outcome(status: int) -> str:
    """A request's outcome label from its HTTP status."""
    if status < 400:
        return "success"
    return "client_error" if status < 500 else "server_error"


def _buckets(histogram: Histogram) -> list[tuple[str, float]]:
    return [(floatToGoString(bound), count) for bound, count in histogram.cumulative()]


class Metrics:
    """`await exposition(accept)` -> (body, content type)."""

    def __init__(self, engine: QueueEngine, requests: RequestTally, connections: ConnectionTally,
                 replication: Callable[[], ReplicationReport] | None = None) -> None:
        self._engine = engine
        self._replication = replication
        self._observe = engine.observe
        self._requests = requests
        self._connections = connections
        self._snapshot: _Snapshot | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # type: ignore[arg-type]

    async def exposition(self, accept: str) -> tuple[bytes, str]:
        snapshot = await self._take_snapshot()
        encoder, content_type = choose_encoder(accept)
        self._snapshot = snapshot  # rendered without an await in between: a concurrent scrape cannot mix in
        try:
            return encoder(self.registry), content_type
        finally:
            self._snapshot = None

    async def _take_snapshot(self) -> _Snapshot:
        queues = self._observe.queues()
        results = await asyncio.gather(*(self._observe.counts(q) for q in queues), return_exceptions=True)
        counts = {q.id: c for q, c in zip(queues, results) if isinstance(c, QueueCounts)}  # a failed count: no gauges
        try:
            move_tasks = await self._observe.running_move_tasks()
        except Exception:  # noqa: BLE001 - the storage is failing: the other metrics still count
            move_tasks = []
        return _Snapshot(self._engine.clock.now_ms(), queues, counts, move_tasks, self._observe.file_sizes(),
                         self._observe.open_long_polls(), self._observe.known_problems(),
                         None if self._replication is None else self._replication())

    def collect(self) -> Iterator[Metric]:
        snapshot = self._snapshot
        if snapshot is None:
            return
        yield from self._queue_families(snapshot)
        yield from self._request_families()
        yield from self._storage_families(snapshot)
        if snapshot.replication is not None:
            yield from _replication_families(snapshot.replication)

    def _queue_families(self, snapshot: _Snapshot) -> Iterator[Metric]:
        counters = {field: CounterMetricFamily(name, text, labels=QUEUE_LABELS)
                    for field, name, text in _QUEUE_COUNTERS}
        sizes = HistogramMetricFamily("queueserver_sent_message_size_bytes", "Size of the messages added to the "
                                      "queue, body and attributes (SentMessageSize).", labels=QUEUE_LABELS)
        gauges = {field: GaugeMetricFamily(name, text, labels=QUEUE_LABELS) for field, name, text in _QUEUE_GAUGES}
        age = GaugeMetricFamily("queueserver_approximate_age_of_oldest_message_seconds", "Age of the oldest "
                                "message in the queue, in any state (ApproximateAgeOfOldestMessage).",
                                labels=QUEUE_LABELS)
        tallies = self._engine.queue_tallies
        for queue in snapshot.queues:
            labels = [queue.name, queue.region, queue.account]
            tally = tallies.get(queue.id)
            if tally is not None:
                for name, family in counters.items():
                    family.add_metric(labels, getattr(tally, name))
                sizes.add_metric(labels, _buckets(tally.sizes), tally.sizes.sum)
            else:  # a queue nothing happened to yet (or since a restart): zeros, so that rates start at once
                for family in counters.values():
                    family.add_metric(labels, 0)
                sizes.add_metric(labels, [("+Inf", 0)], 0)
            counts = snapshot.counts.get(queue.id)
            if counts is not None:
                for name, family in gauges.items():
                    family.add_metric(labels, getattr(counts, name))
                oldest = counts.oldest_enqueued_at_ms
                age.add_metric(labels, 0 if oldest is None else max(0, snapshot.now_ms - oldest) / 1000)
        yield from counters.values()
        yield sizes
        yield from gauges.values()
        yield age

    def _request_families(self) -> Iterator[Metric]:
        merged: dict[tuple[str, str], Histogram] = {}
        for (action, status), histogram in list(self._requests.by_action.items()):
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
        yield GaugeMetricFamily("queueserver_connections_open", "Connections open, on every listener, from their "
                                "accept (a TLS one before its handshake).", value=self._connections.open)
        yield CounterMetricFamily("queueserver_connections_refused", "Connections refused at once because "
                                  "--max-connections were open.", value=self._connections.refused)

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
        yield CounterMetricFamily("queueserver_storage_outages", "Storage outages begun (full or read-only disk, "
                                  "a lock held by another process, I/O errors).", value=storage.outages)
        yield GaugeMetricFamily("queueserver_ready", "1 when the database takes writes and every background task "
                                "runs (as GET /ready, without its probe).", value=0 if snapshot.problems else 1)
        yield CounterMetricFamily("queueserver_readiness_probes", "Probe writes made for GET /ready (at most one "
                                  "a second, however often it is asked).", value=storage.readiness_probes)
        database, wal = snapshot.file_sizes
        yield GaugeMetricFamily("queueserver_database_size_bytes", "Size of the database file.", value=database)
        yield GaugeMetricFamily("queueserver_wal_size_bytes", "Size of the write-ahead log file.", value=wal)
        yield GaugeMetricFamily("queueserver_open_long_polls", "ReceiveMessage calls waiting for messages.",
                                value=snapshot.open_long_polls)
        yield CounterMetricFamily("queueserver_move_task_messages_moved", "Messages moved by message move tasks "
                                  "since the start.", value=storage.redriven)
        yield GaugeMetricFamily("queueserver_move_tasks_running", "Message move tasks under way.",
                                value=len(snapshot.move_tasks))
        moved = GaugeMetricFamily("queueserver_move_task_progress_moved", "Messages a running move task has moved.",
                                  labels=QUEUE_LABELS)
        to_move = GaugeMetricFamily("queueserver_move_task_progress_total", "Messages a running move task set out "
                                    "to move.", labels=QUEUE_LABELS)
        for region, account, name, done, total in snapshot.move_tasks:
            moved.add_metric([name, region, account], done)
            to_move.add_metric([name, region, account], total)
        yield moved
        yield to_move


def _replication_families(report: ReplicationReport) -> Iterator[Metric]:
    """Only with --replicate: how far behind the replica is (replication/status.py says how it is read)."""
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
