"""`consume`: read a batch of messages into a DataFrame, run a function on it, delete them only if it returned.

PySpark has no hook that runs "when this query succeeded" (RazOmessi/spark-sqs uses a
Scala QueryExecutionListener for that), so the safe batch consume is a helper:
1. read with mode "receive" (the messages are in flight, not deleted);
2. `localCheckpoint()` the DataFrame at once, so that `fn` and the delete see exactly
   the same rows: an SQS read is not repeatable, and a second evaluation would
   receive other messages, or none (the messages read first are in flight by then);
3. keep the messages invisible with a driver-side heartbeat while `fn` runs (a long
   `fn` would otherwise hand them to another consumer half-way);
4. if `fn` returns, delete every message the DataFrame holds; if it raises, release
   them (visible again at once; on_failure="expire" leaves them to their visibility
   timeout instead), and re-raise. The queue's RedrivePolicy catches poison batches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from queueserver.spark.compat import require_pyspark
from queueserver.spark.connection import Connection
from queueserver.spark.source import FORMAT
from queueserver.spark.visibility import Held, HeldMessages, VisibilityHeartbeat, settle

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Consumed(Generic[T]):
    """What consume() did: messages read and deleted, and fn's return value."""

    messages: int
    deleted: int
    result: T


def consume(spark: Any, endpoint: str | None, queue: str, fn: Callable[[Any], T], *,
            visibility_timeout: int = 60, heartbeat_interval: float | None = None, num_partitions: int = 2,
            max_messages_per_partition: int = 1000, wait_time_seconds: int = 1, on_failure: str = "release",
            **options: str) -> Consumed[T]:
    """Run `fn(df)` on up to num_partitions × max_messages_per_partition messages; delete them if it returned.

    `options` are passed to the reader (region, accessKeyId…). The DataFrame has the
    reader's schema (message_id, body, attributes, …, receipt_handle). If `fn` raises,
    nothing is deleted and the exception propagates.
    """
    require_pyspark()
    if on_failure not in ("release", "expire"):
        raise ValueError("on_failure must be 'release' or 'expire'")
    from queueserver.spark import register

    register(spark)
    reader = (spark.read.format(FORMAT).option("queue", queue).option("mode", "receive")
              .option("visibilityTimeout", str(visibility_timeout)).option("numPartitions", str(num_partitions))
              .option("maxMessagesPerPartition", str(max_messages_per_partition))
              .option("waitTimeSeconds", str(wait_time_seconds)))
    if endpoint:
        reader = reader.option("endpoint", endpoint)
    for key, value in options.items():
        reader = reader.option(key, value)
    received_at = time.monotonic()
    df = reader.load().localCheckpoint(eager=True)
    connection = Connection.from_options({"queue": queue, "endpoint": endpoint or "", **options})
    client, queue_url = connection.client(), connection.queue_url()
    held = HeldMessages()
    held.add(0, [Held(r.receipt_handle, r.message_id, received_at)
                 for r in df.select("receipt_handle", "message_id").collect()])
    count = len(held)
    interval = visibility_timeout / 3 if heartbeat_interval is None else heartbeat_interval
    heartbeat = VisibilityHeartbeat(client, queue_url, held, visibility_timeout, interval) if interval else None
    log.info("consume: %d message(s) from %s, running %s", count, queue_url, getattr(fn, "__name__", fn))
    if heartbeat is not None:
        heartbeat.beat()  # at once: the receive was Spark jobs ago (on a busy Connect server, seconds)
        heartbeat.start()
    try:
        result = fn(df)
    except BaseException:
        if heartbeat is not None:
            heartbeat.stop()
        if on_failure == "release":
            released, _ = settle(client, queue_url, held.take_all(), delete=False)
            log.warning("consume: the function failed; released %d message(s) to %s", released, queue_url)
        else:
            log.warning("consume: the function failed; %d message(s) come back when their visibility ends", count)
        raise
    finally:
        if heartbeat is not None:
            heartbeat.stop()
    deleted, _ = settle(client, queue_url, held.take_all(), delete=True)
    log.info("consume: deleted %d of %d message(s) from %s", deleted, count, queue_url)
    return Consumed(count, deleted, result)
