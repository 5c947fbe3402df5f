"""The batched SQS calls: DeleteMessageBatch and ChangeMessageVisibilityBatch, ten entries a call.

Why batching without a timer: entries that queue up while a call is in flight go in
the next call (as a database's group commit does), so a busy worker sends one call
per ten messages and an idle one sends a lone entry at once, never waiting on a
timer. The first entries of a loop iteration are collected before the call starts
(the send is scheduled with call_soon), so a FIFO group released at once is one call.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

BATCH_SIZE = 10  # SQS's limit for every batch action

T = TypeVar("T")
R = TypeVar("R")
Io = Callable[..., Awaitable[Any]]  # runs a blocking boto3 call off the event loop


class BatchSender(Generic[T]):
    """Collects entries and sends them `BATCH_SIZE` at a time, at most `max_in_flight` calls at once."""

    def __init__(self, send: Callable[[list[T]], Awaitable[None]], name: str, max_in_flight: int = 2) -> None:
        self._send = send
        self._name = name
        self._max_in_flight = max_in_flight
        self._pending: deque[T] = deque()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._scheduled = False

    def add(self, entry: T) -> None:
        self._pending.append(entry)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        self._scheduled = False
        while self._pending and len(self._in_flight) < self._max_in_flight:
            chunk = [self._pending.popleft() for _ in range(min(BATCH_SIZE, len(self._pending)))]
            task = asyncio.ensure_future(self._send_chunk(chunk))
            self._in_flight.add(task)
            task.add_done_callback(self._sent)

    async def _send_chunk(self, chunk: list[T]) -> None:
        try:
            await self._send(chunk)
        except Exception:  # the send reports its own failures; this is a bug guard
            log.exception("%s: sending a batch failed unexpectedly", self._name)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        self._pump()

    async def drain(self) -> None:
        """Wait until every entry added so far has been sent and answered."""
        while self._pending or self._in_flight:
            self._pump()
            if self._in_flight:
                await asyncio.wait(set(self._in_flight))


async def call(io: Io, method: Callable[..., R], **kwargs: Any) -> R:
    """Run one boto3 client method off the event loop."""
    result: R = await io(functools.partial(method, **kwargs))
    return result


async def change_visibility(io: Io, client: Any, queue_url: str,
                            entries: list[tuple[str, int]]) -> list[dict[str, Any] | None]:
    """ChangeMessageVisibilityBatch for (receipt handle, seconds) pairs, at most ten.

    Returns, per entry in order, None for success or SQS's failure entry
    (Code, Message, SenderFault). Raises if the call as a whole fails.
    """
    assert 0 < len(entries) <= BATCH_SIZE
    request = [{"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": seconds}
               for i, (handle, seconds) in enumerate(entries)]
    response = await call(io, client.change_message_visibility_batch, QueueUrl=queue_url, Entries=request)
    return per_entry(len(entries), response)


async def delete(io: Io, client: Any, queue_url: str, handles: list[str]) -> list[dict[str, Any] | None]:
    """DeleteMessageBatch for at most ten receipt handles; per entry None or the failure entry."""
    assert 0 < len(handles) <= BATCH_SIZE
    request = [{"Id": str(i), "ReceiptHandle": handle} for i, handle in enumerate(handles)]
    response = await call(io, client.delete_message_batch, QueueUrl=queue_url, Entries=request)
    return per_entry(len(handles), response)


NO_ANSWER = {"Code": "NoAnswer", "SenderFault": False,
             "Message": "the response named this entry neither successful nor failed"}


def per_entry(n: int, response: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Per entry Id "0".."n-1": None if it succeeded, else its failure entry.

    An entry the response leaves out counts as failed (NO_ANSWER), never as done:
    botocore parses a body cut short in transit as an empty success.
    """
    failed = {str(f.get("Id")): f for f in response.get("Failed", [])}
    succeeded = {str(s.get("Id")) for s in response.get("Successful", [])}
    return [None if str(i) in succeeded else failed.get(str(i), NO_ANSWER) for i in range(n)]


def describe_failure(entry: dict[str, Any]) -> str:
    return f"{entry.get('Code', 'Unknown')}: {entry.get('Message', '')}".rstrip(": ")
