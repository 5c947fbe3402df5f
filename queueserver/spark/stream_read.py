"""The streaming reader: at-least-once micro-batches from a queue, deleted only after Spark committed them.

The protocol (how Spark drives a Python streaming source, as observed on PySpark 4, followed here):
- Offsets are a batch counter, {"batch": n}, not a position: a queue has none.
- `latestOffset(start, limit)` runs in the driver-side runner process. It first deletes
  every held batch <= start: Spark calls it only after the batch ending at `start` is in
  its commit log, so this "early ack" is safe, and it arrives one trigger after the batch
  (the source's own `commit(end)` comes only with the next non-empty batch, and never
  for the last batch of availableNow). Then it receives up to the limit, holds those
  messages under batch start+1 and returns that offset, or returns `start` if nothing came.
- The receipt handles stay in the runner; `partitions()` (also in the runner) ships the
  rows inside the partitions, so a retried task re-yields the same rows and `read()` on
  the executors does no I/O at all.
- A daemon heartbeat thread in the runner keeps every held message invisible, because
  Spark does not call the source while a batch runs.
- A batch Spark replays after a restart is unknown to the new runner: it is empty, and its
  messages come back after their visibility timeout. So the
  guarantee is at-least-once: dedupe on message_id downstream.
- FIFO queues: all messages of one group in a batch go to one partition, in sequence order;
  the next messages of a group are received only after the group's previous batch is
  deleted (SQS holds back a group while it has messages in flight), so order holds across
  batches too.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from queueserver.spark.options import ReadSettings
from queueserver.spark.rows import (
    GROUP_INDEX,
    SEQUENCE_INDEX,
    SYSTEM_ATTRIBUTE_NAMES,
    Row,
    message_row,
)
from queueserver.spark.visibility import Held, HeldMessages, VisibilityHeartbeat, settle

log = logging.getLogger(__name__)

RECEIVE_BATCH = 10  # SQS's MaxNumberOfMessages limit
PARALLEL_RECEIVES = 4


class MessageBatchPartition(InputPartition):  # type: ignore[misc]
    """One task's share of a micro-batch: the rows themselves (no receipt handles)."""

    def __init__(self, batch: int, index: int, rows: Sequence[Row]) -> None:
        super().__init__(index)
        self.batch = batch
        self.index = index
        self.rows = tuple(rows)


@dataclass
class _Runner:
    """The runner process's live state: never pickled (made on the first call that needs it)."""

    client: Any
    queue_url: str
    fifo: bool
    held: HeldMessages
    rows: dict[int, list[Row]]
    heartbeat: VisibilityHeartbeat | None
    pool: ThreadPoolExecutor
    committed: int = 0  # the highest batch Spark has told us is in its commit log
    available_now: bool = False
    target: int = 0  # availableNow: messages visible when the query started
    taken: int = 0  # availableNow: messages received since then
    exhausted: bool = False  # availableNow: a receive found the queue empty
    warned_once: bool = False


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """spark.readStream.format("queueserver"); see the module docstring for the protocol."""

    def __init__(self, settings: ReadSettings) -> None:
        self._s = settings
        self._state: _Runner | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark ships copies of the reader (read() runs in executors); the live state stays here.
        return {"_s": self._s, "_state": None}

    # -- the runner's state --------------------------------------------------------------

    def _runner(self) -> _Runner:
        if self._state is None:
            s = self._s
            client = s.connection.client()
            queue_url = s.connection.queue_url()
            held = HeldMessages()
            heartbeat = None
            if s.heartbeat_interval > 0:
                heartbeat = VisibilityHeartbeat(client, queue_url, held, s.visibility_timeout,
                                                s.heartbeat_interval).start()
            self._state = _Runner(client=client, queue_url=queue_url, fifo=queue_url.endswith(".fifo"), held=held,
                                  rows={}, heartbeat=heartbeat,
                                  pool=ThreadPoolExecutor(PARALLEL_RECEIVES, thread_name_prefix="queueserver-spark-receive"))
            if s.release_on_stop:
                self._install_stop_handler()
            log.info("streaming from %s (visibility %d s, heartbeat %s, up to %d messages a batch)", queue_url,
                     s.visibility_timeout, f"every {s.heartbeat_interval:g} s" if heartbeat else "off",
                     s.max_messages_per_batch)
        return self._state

    # -- offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}  # called more than once: no side effects

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self._s.max_messages_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        st = self._runner()
        attributes = self._s.connection.queue_attributes(st.queue_url, "ApproximateNumberOfMessages")
        st.available_now, st.target, st.taken, st.exhausted = True, int(attributes["ApproximateNumberOfMessages"]), 0, False
        log.info("availableNow: draining the %d message(s) visible in %s now", st.target, st.queue_url)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        st = self._runner()
        current = int(start["batch"])
        self._acknowledge_through(current)
        want = self._s.max_messages_per_batch
        if isinstance(limit, ReadMaxRows):
            want = limit.max_rows
        elif isinstance(limit, ReadAllAvailable) and not st.available_now and not st.warned_once:
            st.warned_once = True
            log.warning("queueserver stream read with Trigger.Once (or another trigger that reads all available "
                        "without availableNow): Spark never confirms that single batch to the source, so its "
                        "messages are not deleted and come back after their visibility timeout. "
                        "Use trigger(availableNow=True) instead.")
        if st.available_now:
            want = min(want, st.target - st.taken)
            if want <= 0 or st.exhausted:
                return start  # the query ends here, with every batch deleted above
        received = self._receive(st, want)
        if not received:
            st.exhausted = st.available_now
            return start
        batch = current + 1
        st.taken += len(received)
        st.rows[batch] = [row for row, _ in received]
        st.held.add(batch, (held for _, held in received))
        log.debug("batch %d: %d message(s) from %s", batch, len(received), st.queue_url)
        return {"batch": batch}

    def _receive(self, st: _Runner, want: int) -> list[tuple[Row, Held]]:
        """Up to `want` messages: the first receive long-polls, the rest do not (an empty queue costs one wait, not many)."""
        got: list[tuple[Row, Held]] = []
        first = True
        while len(got) < want:
            left = want - len(got)
            asks = [RECEIVE_BATCH] if first else [min(RECEIVE_BATCH, left - i * RECEIVE_BATCH)
                                                   for i in range(min(PARALLEL_RECEIVES, math.ceil(left / RECEIVE_BATCH)))]
            asks[0] = min(asks[0], left)
            wait = self._s.wait_time_seconds if first else 0
            results = list(st.pool.map(functools.partial(self._receive_once, st, wait=wait), asks))
            first = False
            for result in results:
                got.extend(result)
            if any(len(result) < n for result, n in zip(results, asks, strict=True)):
                break  # the queue has no more for now
        return got

    def _receive_once(self, st: _Runner, n: int, *, wait: int) -> list[tuple[Row, Held]]:
        sent_at = time.monotonic()
        response = st.client.receive_message(
            QueueUrl=st.queue_url, MaxNumberOfMessages=n, WaitTimeSeconds=wait,
            VisibilityTimeout=self._s.visibility_timeout, MessageSystemAttributeNames=SYSTEM_ATTRIBUTE_NAMES,
            MessageAttributeNames=["All"])
        out = []
        for m in response.get("Messages", []):
            out.append((message_row(m, st.queue_url, state="in_flight"),
                        Held(str(m["ReceiptHandle"]), str(m["MessageId"]), sent_at)))
        return out

    # -- planning and reading -------------------------------------------------------------

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        st = self._runner()
        first, last = int(start["batch"]) + 1, int(end["batch"])
        rows: list[Row] = []
        for batch in range(first, last + 1):
            if batch in st.rows:
                rows.extend(st.rows[batch])
            else:
                log.info("batch %d is not held by this run (a replay after a restart): it is empty, and its "
                         "messages come back after their visibility timeout", batch)
        if not rows:
            return []
        shares = _by_group(rows, self._s.num_partitions) if st.fifo else _round_robin(rows, self._s.num_partitions)
        return [MessageBatchPartition(last, i, share) for i, share in enumerate(shares) if share]

    def read(self, partition: InputPartition) -> Iterator[Row]:
        assert isinstance(partition, MessageBatchPartition)
        yield from partition.rows

    # -- acknowledging ---------------------------------------------------------------------

    def commit(self, end: dict[str, int]) -> None:
        if self._state is not None:
            self._acknowledge_through(int(end["batch"]))

    def _acknowledge_through(self, batch: int) -> None:
        st = self._runner()
        st.committed = max(st.committed, batch)
        for done in [b for b in st.rows if b <= batch]:
            del st.rows[done]
        held = st.held.take_through(batch)
        if not held:
            return
        try:
            deleted, _ = settle(st.client, st.queue_url, held, delete=True)
        except Exception as exc:  # noqa: BLE001 - the whole call failed: keep them (the heartbeat goes on), retry later
            log.warning("deleting %d committed message(s) from %s failed (%s); retrying at the next batch",
                        len(held), st.queue_url, exc)
            st.held.put_back(batch, held)
            return
        log.debug("deleted %d message(s) of batches <= %d from %s", deleted, batch, st.queue_url)

    def _install_stop_handler(self) -> None:
        """Spark ends the runner with SIGTERM and never calls stop() (measured, pyspark 4.3): hook it.

        Only with releaseOnStop, and only on the runner's main thread (where Python runs
        signal handlers). The handler settles what it can, then lets SIGTERM do what it did before.
        """
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum: int, frame: Any) -> None:
            # Spark sends SIGTERM twice (measured): a nested run of this handler would end the
            # process (below) while the first one is still releasing. Ignore the second.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.stop()
            except Exception:  # best effort: the messages come back after their visibility anyway
                log.exception("releasing messages on SIGTERM failed")
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)

    def stop(self) -> None:
        """Best effort, as Spark may not call it: delete what is committed, release the rest."""
        st = self._state
        if st is None:
            return
        if st.heartbeat is not None:
            st.heartbeat.stop(timeout=5.0)
        self._acknowledge_through(st.committed)
        rest = st.held.take_all()
        if rest and self._s.release_on_stop:
            try:
                settle(st.client, st.queue_url, rest, delete=False)
                log.info("released %d uncommitted message(s) back to %s", len(rest), st.queue_url)
            except Exception as exc:  # noqa: BLE001 - they come back when their visibility ends anyway
                log.warning("releasing %d message(s) failed: %s", len(rest), exc)
        st.pool.shutdown(wait=False)
        self._state = None


def _round_robin(rows: list[Row], partitions: int) -> list[list[Row]]:
    k = max(1, min(partitions, len(rows)))
    return [rows[i::k] for i in range(k)]


def _by_group(rows: list[Row], partitions: int) -> list[list[Row]]:
    """FIFO: each group whole in one partition, in sequence order; groups spread by size."""
    groups: dict[str | None, list[Row]] = {}
    for row in rows:
        groups.setdefault(row[GROUP_INDEX], []).append(row)
    shares: list[list[Row]] = [[] for _ in range(max(1, min(partitions, len(groups))))]
    for group_rows in sorted(groups.values(), key=len, reverse=True):
        group_rows.sort(key=lambda r: int(r[SEQUENCE_INDEX] or 0))
        min(shares, key=len).extend(group_rows)
    return shares
