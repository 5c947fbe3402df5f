"""Messages the driver holds between a receive and their delete, and the thread that keeps them invisible.

Why a thread and not the consumer's `Heartbeat`: the consumer's heartbeat lives on the
worker's asyncio loop, while the places that hold messages here (the streaming source
runner, the `consume()` helper) are plain synchronous Python whose main thread is
blocked inside Spark: in the runner it waits on Spark's socket between calls, in
`consume()` it runs the user's function. A daemon thread is the only thing that can
act in those gaps (tried on a local Spark: without it every held message went to another
consumer during a long batch; with it, none). The parts that are the same rules are reused from the consumer: ten
entries a call, SQS's 12-hour cap with the consumer's safety margin, failure wording.

Every extension asks for the full visibility timeout again, for every held message,
each interval. That is simpler than the consumer's "only those near their end" and
costs little here: the driver holds one or two micro-batches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Self

from queueserver.consumer.heartbeat import CAP_SAFETY_MARGIN_MS
from queueserver.consumer.sqs_calls import BATCH_SIZE, describe_failure, per_entry
from queueserver.limits import MAX_VISIBILITY_TIMEOUT_SECONDS

log = logging.getLogger(__name__)

PARALLEL_CALLS = 4  # batch calls in flight at once: a 1000-message ack is 100 calls


@dataclass(frozen=True)
class Held:
    """One received message the driver still owes a delete or a release."""

    receipt_handle: str
    message_id: str
    received_at: float  # time.monotonic() read before the receive was sent: never later than SQS's


def _chunks(items: list[Any]) -> list[list[Any]]:
    return [items[i:i + BATCH_SIZE] for i in range(0, len(items), BATCH_SIZE)]


def _run_chunks(call: Callable[[list[Any]], list[dict[str, Any] | None]], items: list[Any]) -> list[dict[str, Any] | None]:
    """Apply a ten-entry batch call to every chunk of `items`; per item None or SQS's failure entry."""
    chunks = _chunks(items)
    if len(chunks) <= 1:
        return [outcome for chunk in chunks for outcome in call(chunk)]
    with ThreadPoolExecutor(min(PARALLEL_CALLS, len(chunks)), thread_name_prefix="queueserver-spark-sqs") as pool:
        return [outcome for outcomes in pool.map(call, chunks) for outcome in outcomes]


def delete_messages(client: Any, queue_url: str, handles: list[str]) -> list[dict[str, Any] | None]:
    """DeleteMessageBatch for every handle, ten a call; per handle None or the failure entry.

    Raises if a call as a whole fails (after boto3's own retries).
    """
    def call(chunk: list[str]) -> list[dict[str, Any] | None]:
        entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(chunk)]
        return per_entry(len(chunk), client.delete_message_batch(QueueUrl=queue_url, Entries=entries))
    return _run_chunks(call, handles)


def change_visibility(client: Any, queue_url: str, changes: list[tuple[str, int]]) -> list[dict[str, Any] | None]:
    """ChangeMessageVisibilityBatch for (handle, seconds) pairs, ten a call; per pair None or the failure."""
    def call(chunk: list[tuple[str, int]]) -> list[dict[str, Any] | None]:
        entries = [{"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": s} for i, (h, s) in enumerate(chunk)]
        return per_entry(len(chunk), client.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries))
    return _run_chunks(call, changes)


def settle(client: Any, queue_url: str, held: list[Held], *, delete: bool) -> tuple[int, list[Held]]:
    """Delete (or release: visibility 0) `held`; (how many succeeded, those whose entry failed).

    A failed entry is logged with its reason: for a delete it usually means the visibility
    had run out and the message was received again, so it will be delivered twice.
    """
    if not held:
        return 0, []
    if delete:
        outcomes = delete_messages(client, queue_url, [h.receipt_handle for h in held])
    else:
        outcomes = change_visibility(client, queue_url, [(h.receipt_handle, 0) for h in held])
    failed = [h for h, outcome in zip(held, outcomes, strict=True) if outcome is not None]
    for h, outcome in zip(held, outcomes, strict=True):
        if outcome is not None:
            log.warning("could not %s message %s (%s)%s", "delete" if delete else "release", h.message_id,
                        describe_failure(outcome),
                        "; it may be delivered again" if delete else "; it comes back when its visibility ends")
    return len(held) - len(failed), failed


class HeldMessages:
    """The driver's received-but-unsettled messages, by batch number; safe to use from two threads."""

    def __init__(self) -> None:
        # Reentrant: a SIGTERM handler (stream_read.py) may run on the main thread while it holds the lock.
        self._lock = threading.RLock()
        self._batches: dict[int, list[Held]] = {}

    def add(self, batch: int, held: Iterable[Held]) -> None:
        with self._lock:
            self._batches.setdefault(batch, []).extend(held)

    def take_through(self, batch: int) -> list[Held]:
        """Remove and return every message of batches <= `batch` (to delete them)."""
        with self._lock:
            done = [b for b in self._batches if b <= batch]
            return [h for b in sorted(done) for h in self._batches.pop(b)]

    def take_all(self) -> list[Held]:
        with self._lock:
            held = [h for b in sorted(self._batches) for h in self._batches[b]]
            self._batches.clear()
            return held

    def put_back(self, batch: int, held: list[Held]) -> None:
        """Return messages whose delete failed as a whole call, to be tried again."""
        if held:
            self.add(batch, held)

    def forget(self, lost: Iterable[Held]) -> None:
        """Stop tracking messages SQS will no longer let us extend."""
        gone = set(lost)
        with self._lock:
            for b in list(self._batches):
                self._batches[b] = [h for h in self._batches[b] if h not in gone]
                if not self._batches[b]:
                    del self._batches[b]

    def snapshot(self) -> list[Held]:
        with self._lock:
            return [h for batch in self._batches.values() for h in batch]

    def __len__(self) -> int:
        with self._lock:
            return sum(len(batch) for batch in self._batches.values())


class VisibilityHeartbeat:
    """A daemon thread that re-extends every message in `held` to `visibility_timeout`, every `interval` s."""

    def __init__(self, client: Any, queue_url: str, held: HeldMessages, visibility_timeout: int,
                 interval: float) -> None:
        if interval <= 0 or interval >= visibility_timeout:
            raise ValueError(f"the heartbeat interval must be above 0 and below the visibility timeout "
                             f"({visibility_timeout} s), not {interval}")
        self._client = client
        self._queue_url = queue_url
        self._held = held
        self._visibility_timeout = visibility_timeout
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queueserver-spark-heartbeat", daemon=True)
        self.beats = 0
        self.extended = 0
        self.lost = 0

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop, and wait for a round in progress (so that no extension lands after a release)."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - a failed round is retried at the next interval
                log.warning("visibility heartbeat for %s failed: %s", self._queue_url, exc)

    def beat(self) -> None:
        """One round: extend everything held, drop what SQS refuses (and what reached 12 hours)."""
        now = time.monotonic()
        plan: list[tuple[Held, int]] = []
        capped: list[Held] = []
        for h in self._held.snapshot():
            allowed = int(MAX_VISIBILITY_TIMEOUT_SECONDS - (now - h.received_at) - CAP_SAFETY_MARGIN_MS / 1000)
            if allowed <= 0:
                capped.append(h)
            else:
                plan.append((h, min(self._visibility_timeout, allowed)))
        for h in capped:
            log.warning("message %s reached SQS's 12-hour visibility limit; it will be delivered again",
                        h.message_id)
        outcomes = change_visibility(self._client, self._queue_url, [(h.receipt_handle, s) for h, s in plan])
        still_held = set(self._held.snapshot())
        lost = list(capped)
        for (h, _), outcome in zip(plan, outcomes, strict=True):
            if outcome is None:
                self.extended += 1
            elif h in still_held and outcome.get("SenderFault", True):
                log.warning("SQS refused to extend message %s (%s); it may be delivered again",
                            h.message_id, describe_failure(outcome))
                lost.append(h)
        self._held.forget(lost)
        self.lost += len(lost)
        self.beats += 1
        log.debug("heartbeat extended %d message(s) of %s", len(plan) - len(lost), self._queue_url)
