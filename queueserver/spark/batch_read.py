"""The batch reader: `spark.read.format("queueserver")`, in one of two modes.

- "browse" (the default): queueserver's `QueueserverBrowseMessages` extension lists the
  queue without receiving it. Nothing becomes invisible, no receive count moves, and a
  second action reads the same rows again: what analysing a dead-letter queue needs.
  The listing is paged (1000 a call) in one partition, because a page's token is only
  known after the page before it; `repartition()` afterwards if the analysis is heavy.
  It needs queueserver: against AWS SQS it fails with a message that says so.
- "receive": `numPartitions` tasks each receive up to `maxMessagesPerPartition` messages
  with the visibility timeout, and the rows carry their `receipt_handle`. Nothing is
  deleted here: the messages are in flight until their visibility ends. That is the
  raw material of `queueserver.spark.consume()`, which materialises the DataFrame once,
  runs your function and deletes only if it returned. Why not a mode that deletes as it
  reads: it would be at-most-once (a failing job would lose what it had read), the
  common complaint against SQS connectors that do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from queueserver.extensions import MAX_BROWSE
from queueserver.spark.connection import browse_page
from queueserver.spark.options import BROWSE, ReadSettings
from queueserver.spark.rows import SYSTEM_ATTRIBUTE_NAMES, Row, message_row

log = logging.getLogger(__name__)

RECEIVE_BATCH = 10


class ReceivePartition(InputPartition):  # type: ignore[misc]
    """One receiving task: how many messages it may take."""

    def __init__(self, index: int, max_messages: int) -> None:
        super().__init__(index)
        self.index = index
        self.max_messages = max_messages


class BrowsePartition(InputPartition):  # type: ignore[misc]
    """The single browsing task."""

    def __init__(self, max_messages: int) -> None:
        super().__init__(0)
        self.max_messages = max_messages


class QueueBatchReader(DataSourceReader):  # type: ignore[misc]
    """See the module docstring."""

    def __init__(self, settings: ReadSettings) -> None:
        self._s = settings

    def partitions(self) -> Sequence[InputPartition]:
        if self._s.mode == BROWSE:
            return [BrowsePartition(self._s.max_messages)]
        return [ReceivePartition(i, self._s.max_messages_per_partition) for i in range(self._s.num_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Row]:
        if isinstance(partition, BrowsePartition):
            yield from self._browse(partition.max_messages)
        else:
            assert isinstance(partition, ReceivePartition)
            yield from self._receive(partition.max_messages)

    def _browse(self, max_messages: int) -> Iterator[Row]:
        client = self._s.connection.client()
        queue_url = self._s.connection.queue_url()
        token: str | None = None
        count = 0
        while True:
            page_size = MAX_BROWSE if not max_messages else min(MAX_BROWSE, max_messages - count)
            messages, token = browse_page(client, queue_url, page_size, token)
            for m in messages:
                yield message_row(m, queue_url, state=m.get("State"))
            count += len(messages)
            if not token or (max_messages and count >= max_messages):
                return

    def _receive(self, max_messages: int) -> Iterator[Row]:
        """Receive until this task's share is full or a receive comes back short.

        Every receive long-polls `waitTimeSeconds` (1 s by default): it returns as soon as
        there is a message, and on AWS SQS a short poll may miss messages that exist.
        """
        client = self._s.connection.client()
        queue_url = self._s.connection.queue_url()
        count = 0
        while count < max_messages:
            ask = min(RECEIVE_BATCH, max_messages - count)
            response = client.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=ask, WaitTimeSeconds=self._s.wait_time_seconds,
                VisibilityTimeout=self._s.visibility_timeout, MessageSystemAttributeNames=SYSTEM_ATTRIBUTE_NAMES,
                MessageAttributeNames=["All"])
            messages = response.get("Messages", [])
            for m in messages:
                yield message_row(m, queue_url, state="in_flight", receipt_handle=str(m["ReceiptHandle"]))
            count += len(messages)
            if not messages:
                return
        log.debug("received %d message(s) from %s", count, queue_url)
