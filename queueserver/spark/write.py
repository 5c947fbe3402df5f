"""The writers: one message per row, sent with SendMessageBatch, every failure reported by row.

Why failures travel back in the commit message instead of failing the task: a failed
task is retried by Spark and would send its partition's rows a second time (a queue
has no transaction to roll back). So a task sends what it can,
retries entries SQS failed on its own side, records the rows SQS refused (too long,
invalid characters, a missing group id…) and returns; `commit()` on the driver then
raises `QueueWriteError` naming each refused row, and `save()` fails with it. Nothing
is dropped silently, and nothing that was sent is sent twice by a retry. A call that
fails as a whole (the endpoint is down) does fail the task: whether those rows arrived
is unknown, and the job must not look successful.

FIFO queues: every row needs a group id (option groupIdColumn). Without a
deduplicationIdColumn, and unless the queue deduplicates by content, each row gets a
deterministic id (sha256 of the write's id, partition and row index), so that a task
Spark retries within the 5-minute deduplication window sends no duplicates.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from queueserver.consumer.sqs_calls import per_entry
from queueserver.errors import ClientError
from queueserver.spark.options import WriteSettings

log = logging.getLogger(__name__)

BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 1_048_576  # SQS (and queueserver): a message and a whole batch are at most 1 MiB
MAX_REPORTED_FAILURES = 100  # per partition; the count is always complete
RETRIES = 3  # for entries that failed on SQS's side (SenderFault false)


class QueueWriteError(ClientError, RuntimeError):
    """Some rows were not sent; `failures` lists (partition, row index, code, message) for each."""

    def __init__(self, queue: str, failed: int, total: int, failures: list[tuple[int, int, str, str]]) -> None:
        self.failed, self.total, self.failures = failed, total, failures
        shown = "; ".join(f"partition {p} row {r}: {code} {msg}".strip() for p, r, code, msg in failures[:20])
        more = f" (and {failed - 20} more)" if failed > 20 else ""
        super().__init__(f"{failed} of {total} row(s) were not sent to {queue}: {shown}{more}")


@dataclass
class SentMessages(WriterCommitMessage):  # type: ignore[misc]
    """What one task did: rows sent, rows refused (with reasons)."""

    partition: int
    sent: int = 0
    failed: int = 0
    failures: list[tuple[int, int, str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Plan:
    """Decided on the driver, shipped to every task."""

    settings: WriteSettings
    queue_url: str
    columns: tuple[str, ...]
    fifo: bool
    generate_deduplication_ids: bool
    write_id: str


def make_plan(settings: WriteSettings, schema: StructType, overwrite: bool) -> _Plan:
    """Check the options against the DataFrame and the queue, once, on the driver."""
    if overwrite:
        raise ValueError("a queue can only be appended to: use mode('append')")
    columns = tuple(schema.fieldNames())
    for option, column in (("attributesColumn", settings.attributes_column),
                           ("groupIdColumn", settings.group_id_column),
                           ("deduplicationIdColumn", settings.deduplication_id_column),
                           ("delaySecondsColumn", settings.delay_seconds_column)):
        if column is not None and column not in columns:
            raise ValueError(f"option {option}: the DataFrame has no column {column!r} (it has {list(columns)})")
    queue_url = settings.connection.queue_url()
    fifo = queue_url.endswith(".fifo")
    generate = False
    if fifo:
        if settings.group_id_column is None:
            raise ValueError("writing to a FIFO queue needs option groupIdColumn (every message needs a group id)")
        if settings.deduplication_id_column is None:
            attrs = settings.connection.queue_attributes(queue_url, "ContentBasedDeduplication")
            generate = attrs.get("ContentBasedDeduplication", "false").lower() != "true"
    return _Plan(settings, queue_url, columns, fifo, generate, uuid.uuid4().hex)


def send_rows(plan: _Plan, rows: Iterator[Any], partition: int) -> SentMessages:
    """Send every row of one partition, ten (and at most 1 MiB) per SendMessageBatch."""
    client = plan.settings.connection.client()
    result = SentMessages(partition)
    pending: list[tuple[int, dict[str, Any], int]] = []  # (row index, entry, bytes)
    pending_bytes = 0
    for index, row in enumerate(rows):
        try:
            entry, size = _entry(plan, row, partition, index)
        except ValueError as exc:
            _record(result, partition, index, "InvalidRow", str(exc))
            continue
        if pending and (len(pending) == BATCH_ENTRIES or pending_bytes + size > MAX_BATCH_BYTES):
            _send(client, plan, pending, result)
            pending, pending_bytes = [], 0
        pending.append((index, entry, size))
        pending_bytes += size
    if pending:
        _send(client, plan, pending, result)
    log.info("partition %d: sent %d message(s) to %s, %d refused", partition, result.sent, plan.queue_url,
             result.failed)
    return result


def _entry(plan: _Plan, row: Any, partition: int, index: int) -> tuple[dict[str, Any], int]:
    s = plan.settings
    if s.body_column in plan.columns:
        body = row[s.body_column]
        if body is None:
            raise ValueError(f"column {s.body_column!r} is null")
        body = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else str(body)
    else:
        body = json.dumps(row.asDict(recursive=True), default=str, separators=(",", ":"))
    entry: dict[str, Any] = {"MessageBody": body}
    size = len(body.encode("utf-8"))
    if s.attributes_column is not None and row[s.attributes_column]:
        attributes = {}
        for name, value in dict(row[s.attributes_column]).items():
            if value is not None:
                attributes[str(name)] = {"DataType": "String", "StringValue": str(value)}
                size += len(str(name).encode()) + len(str(value).encode()) + len("String")
        if attributes:
            entry["MessageAttributes"] = attributes
    if s.group_id_column is not None and row[s.group_id_column] is not None:
        entry["MessageGroupId"] = str(row[s.group_id_column])
    if s.deduplication_id_column is not None and row[s.deduplication_id_column] is not None:
        entry["MessageDeduplicationId"] = str(row[s.deduplication_id_column])
    elif plan.generate_deduplication_ids:
        entry["MessageDeduplicationId"] = hashlib.sha256(
            f"{plan.write_id}:{partition}:{index}".encode()).hexdigest()[:64]
    if s.delay_seconds_column is not None and row[s.delay_seconds_column] is not None:
        entry["DelaySeconds"] = int(row[s.delay_seconds_column])
    if size > MAX_BATCH_BYTES:
        raise ValueError(f"the message is {size} bytes, over SQS's limit of {MAX_BATCH_BYTES}")
    return entry, size


def _send(client: Any, plan: _Plan, pending: list[tuple[int, dict[str, Any], int]], result: SentMessages) -> None:
    """One SendMessageBatch, then retries of the entries that failed on SQS's side or went unanswered
    (at least once: an unanswered entry may have been stored, and is sent again)."""
    todo = pending
    for attempt in range(RETRIES + 1):
        entries = [dict(entry, Id=str(i)) for i, (_, entry, _) in enumerate(todo)]
        response = client.send_message_batch(QueueUrl=plan.queue_url, Entries=entries)
        for ok in sorted(response.get("Successful", []), key=lambda e: int(e["Id"])):
            result.sent += 1
        retry = []
        for item, failure in zip(todo, per_entry(len(todo), response), strict=True):
            if failure is None:
                continue
            if not failure.get("SenderFault", True) and attempt < RETRIES:
                retry.append(item)
            else:
                _record(result, result.partition, item[0], str(failure.get("Code", "Unknown")),
                        str(failure.get("Message", "")))
        if not retry:
            return
        time.sleep(0.2 * 2 ** attempt)
        todo = retry


def _record(result: SentMessages, partition: int, index: int, code: str, message: str) -> None:
    result.failed += 1
    log.warning("partition %d row %d was not sent: %s %s", partition, index, code, message)
    if len(result.failures) < MAX_REPORTED_FAILURES:
        result.failures.append((partition, index, code, message))


def _partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _check(queue_url: str, messages: list[WriterCommitMessage | None]) -> int:
    done = [m for m in messages if isinstance(m, SentMessages)]
    failed = sum(m.failed for m in done)
    total = sum(m.sent + m.failed for m in done)
    if failed:
        raise QueueWriteError(queue_url, failed, total, [f for m in done for f in m.failures])
    return total


class QueueWriter(DataSourceWriter):  # type: ignore[misc]
    """df.write.format("queueserver").mode("append").save()."""

    def __init__(self, plan: _Plan) -> None:
        self._plan = plan

    def write(self, iterator: Iterator[Any]) -> SentMessages:
        return send_rows(self._plan, iterator, _partition_id())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = _check(self._plan.queue_url, messages)
        log.info("wrote %d message(s) to %s", total, self._plan.queue_url)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.sent for m in messages if isinstance(m, SentMessages))
        log.error("the write to %s failed; %d message(s) had been sent and stay on the queue (it has no "
                  "transaction to roll back)", self._plan.queue_url, sent)


class QueueStreamWriter(DataSourceStreamWriter):  # type: ignore[misc]
    """df.writeStream.format("queueserver"): the same per micro-batch."""

    def __init__(self, plan: _Plan) -> None:
        self._plan = plan

    def write(self, iterator: Iterator[Any]) -> SentMessages:
        return send_rows(self._plan, iterator, _partition_id())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = _check(self._plan.queue_url, messages)
        log.info("batch %d: wrote %d message(s) to %s", batchId, total, self._plan.queue_url)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = sum(m.sent for m in messages if isinstance(m, SentMessages))
        log.error("batch %d of the stream to %s failed; %d message(s) had been sent and stay on the queue",
                  batchId, self._plan.queue_url, sent)
