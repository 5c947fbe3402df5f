"""The worker's core, owned by its event loop: receive, dispatch units, run handlers, settle messages.

Every method here runs on the one event loop, so the state (tracked messages, ready
units, running units) needs no lock. The orderings that matter:
- a message is tracked from its receive until SQS confirms its delete or visibility
  change, so the heartbeat covers waiting and running messages alike;
- on a FIFO queue a unit is one message group's messages from one receive, run in
  order, one unit per group at a time; a failure releases the rest of the unit
  before the failed message's own policy runs (so the group is redelivered in order);
- a visibility change for a message whose extension is in flight waits for it, or
  the extension could land second and hide the message again.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

from queueserver.consumer import sqs_calls
from queueserver.consumer.heartbeat import seconds_left_under_cap
from queueserver.consumer.hooks import Reporter
from queueserver.consumer.policies import Outcome
from queueserver.consumer.settings import WorkerSettings
from queueserver.consumer.threads import DaemonThreadPool
from queueserver.consumer.timing import Clock, sleep_until
from queueserver.consumer.tracking import State, Tracked, units_of_work

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Any]
MAX_RECEIVE_BACKOFF_SECONDS = 20


def is_async_handler(handler: Handler) -> bool:
    """A coroutine function, or an object whose __call__ is one (functools.partial included)."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None))  # noqa: B004


class Processor:
    """Receives and runs messages until `stopping` is set; see the module docstring."""

    def __init__(self, settings: WorkerSettings, client: Any, handler: Handler, clock: Clock, reporter: Reporter,
                 io_pool: DaemonThreadPool, handler_pool: DaemonThreadPool) -> None:
        self._s = settings
        self._client = client
        self._handler = handler
        self._handler_is_async = is_async_handler(handler)
        self._clock = clock
        self._reporter = reporter
        self._io = io_pool.run
        self._handler_pool = handler_pool
        self._receive_kwargs = settings.receive_kwargs()
        self.stopping = asyncio.Event()
        self._room = asyncio.Event()  # set when room frees up, or on stop: wakes the receive loop
        self._tracked: set[Tracked] = set()
        self._active = 0  # tracked messages waiting or running: what the receive loop has room for
        self._ready: list[list[Tracked]] = []  # units received, not started
        self._units: dict[asyncio.Task[None], list[Tracked]] = {}  # running units: their messages not yet done
        self._busy_groups: set[str] = set()
        self._deletes: sqs_calls.BatchSender[Tracked] = sqs_calls.BatchSender(self._send_deletes, "deletes")
        self._changes: sqs_calls.BatchSender[tuple[Tracked, int, bool]] = sqs_calls.BatchSender(
            self._send_changes, "visibility changes")

    def tracked(self) -> list[Tracked]:
        return list(self._tracked)

    def begin_stop(self) -> None:
        """No more receives and no more starts; running handlers go on."""
        if not self.stopping.is_set():
            self.stopping.set()
            self._room.set()

    # -- receiving and dispatching ---------------------------------------------------

    async def receive_loop(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            wanted = self._room_for()
            if wanted <= 0:
                self._room.clear()
                await self._room.wait()
                continue
            sent_at = self._clock.now_ms()
            try:
                response = await sqs_calls.call(self._io, self._client.receive_message,
                                                MaxNumberOfMessages=wanted, **self._receive_kwargs)
            except Exception as exc:  # noqa: BLE001 - any failure of the call: report, back off, retry
                failures += 1
                self._reporter.error("ReceiveMessage", exc)
                await self._pause(min(2 ** failures, MAX_RECEIVE_BACKOFF_SECONDS))
                continue
            failures = 0
            received = [self._track(m, sent_at) for m in response.get("Messages", [])]
            if self.stopping.is_set():
                self.release(received)  # the receive that was in flight when the stop came
                return
            self._ready.extend(units_of_work(received, self._s.is_fifo))
            self._pump()
            if not received and self._s.wait_time_seconds == 0:
                await self._pause(1)  # short polling an empty queue: do not spin

    def _room_for(self) -> int:
        """How many messages the next receive asks for (0: wait for room).

        A standard queue counts messages: at most max_concurrency + prefetch are held.
        A FIFO queue counts message groups (units), because one group's messages run
        one after another: counting messages would let one group's backlog keep every
        other group out. There, a receive asks for max_messages while fewer than
        max_concurrency + prefetch units are running or waiting.
        """
        if self._s.is_fifo:
            units = len(self._units) + len(self._ready)
            return self._s.max_messages if units < self._s.capacity else 0
        return min(self._s.max_messages, self._s.capacity - self._active)

    async def _pause(self, seconds: float) -> None:
        await sleep_until(self._clock, self._clock.now_ms() + round(seconds * 1000), self.stopping)

    def _track(self, message: dict[str, Any], sent_at: int) -> Tracked:
        group = message.get("Attributes", {}).get("MessageGroupId") if self._s.is_fifo else None
        t = Tracked(message, str(message["ReceiptHandle"]), sent_at,
                    sent_at + self._s.visibility_timeout * 1000, group)
        self._tracked.add(t)
        self._active += 1
        self._reporter.received(message)
        return t

    def release_not_started(self) -> None:
        """Release every message received but not started: units waiting for a slot, and the
        messages a running FIFO unit has not reached yet (its group's order is kept, since SQS
        delivers none of them while the running one is in flight)."""
        units, self._ready = self._ready, []
        waiting = [t for remaining in self._units.values() for t in remaining if t.state is State.WAITING]
        self.release([t for unit in units for t in unit] + waiting)

    def _pump(self) -> None:
        """Start ready units while there is a free slot; one unit per FIFO group at a time."""
        i = 0
        while not self.stopping.is_set() and len(self._units) < self._s.max_concurrency and i < len(self._ready):
            unit = self._ready[i]
            group = unit[0].group
            if group is not None and group in self._busy_groups:
                i += 1
                continue
            del self._ready[i]
            if group is not None:
                self._busy_groups.add(group)
            task = asyncio.ensure_future(self._run_unit(unit))
            self._units[task] = unit
            task.add_done_callback(functools.partial(self._unit_done, group))

    def _unit_done(self, group: str | None, task: asyncio.Task[None]) -> None:
        self._units.pop(task, None)
        if group is not None:
            self._busy_groups.discard(group)
        self._room.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("a unit of work failed unexpectedly", exc_info=task.exception())
        self._pump()

    async def finish_running(self, grace_ms: int, cut_short: asyncio.Event) -> bool:
        """Let running units finish within `grace_ms`; cancel the rest. True if any was cut off."""
        units = set(self._units)
        if not units:
            return False
        grace = asyncio.ensure_future(sleep_until(self._clock, self._clock.now_ms() + grace_ms, cut_short))
        try:
            while (running := {u for u in units if not u.done()}) and not grace.done():
                await asyncio.wait(running | {grace}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            grace.cancel()
            await asyncio.gather(grace, return_exceptions=True)
        leftovers = [u for u in units if not u.done()]
        if not leftovers:
            return False
        log.warning("%d handler(s) still running after the grace period: cancelling them and releasing "
                    "their messages", len(leftovers))
        for unit in leftovers:
            unit.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)
        return True

    async def drain(self) -> None:
        """Wait until every delete and visibility change queued so far is answered."""
        await self._deletes.drain()
        await self._changes.drain()
        await self._deletes.drain()

    # -- running handlers ------------------------------------------------------------

    async def _run_unit(self, unit: list[Tracked]) -> None:
        """Run a unit's messages in order; on a FIFO queue a failure releases the rest, in order.

        `remaining` is the unit's own list (also seen by release_not_started), consumed as it runs.
        """
        remaining = unit
        try:
            while remaining and not self.stopping.is_set():
                t = remaining[0]
                if not self._startable(t):
                    remaining.pop(0)
                    self._leave(t, State.DONE)
                    if self._s.is_fifo:
                        break  # running its successors would break the group's order
                    continue
                ok = await self._run_message(t)
                remaining.pop(0)
                if ok:
                    self._leave(t, State.SETTLING)
                    self._deletes.add(t)
                    continue
                if self._s.is_fifo:
                    self.release(list(remaining))  # before the failed one can become visible again
                    remaining.clear()
                self._apply_failure_policy(t)
        except asyncio.CancelledError:
            if remaining and remaining[0].state is State.RUNNING:
                self._reporter.abandoned(1)
                log.warning("handler for message %s cut off by the shutdown%s; message released",
                            remaining[0].message_id, "" if self._handler_is_async else " (its thread runs on)")
            raise
        finally:
            self.release(list(remaining))

    def _startable(self, t: Tracked) -> bool:
        if t.lost:
            return False
        if self._clock.now_ms() >= t.deadline_ms:
            t.lost = True
            self._reporter.lost(t.message, "its visibility ran out before its handler could start")
            return False
        return True

    async def _run_message(self, t: Tracked) -> bool:
        t.state = State.RUNNING
        started = self._clock.now_ms()
        try:
            if self._handler_is_async:
                result = await self._handler(t.message)
            else:
                result = await self._handler_pool.run(self._handler, t.message)
                if inspect.isawaitable(result):
                    result = await result
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the shutdown cancelled us
            return self._failed(t, asyncio.CancelledError("the handler was cancelled"), started)
        except Exception as exc:  # noqa: BLE001 - a handler failing in any way fails its message
            return self._failed(t, exc, started)
        if result is Outcome.FAILED:
            return self._failed(t, None, started)
        self._reporter.succeeded(t.message, (self._clock.now_ms() - started) / 1000)
        return True

    def _failed(self, t: Tracked, error: BaseException | None, started: int) -> bool:
        if error is not None:
            log.warning("handler failed for message %s: %r", t.message_id, error, exc_info=error)
        else:
            log.info("handler returned FAILED for message %s", t.message_id)
        self._reporter.failed(t.message, error, (self._clock.now_ms() - started) / 1000)
        return False

    # -- settling: delete, release, failure policy -----------------------------------

    def _leave(self, t: Tracked, state: State) -> None:
        if t.active:
            self._active -= 1
            self._room.set()
        t.state = state
        if state is State.DONE:
            self._tracked.discard(t)

    def release(self, items: list[Tracked]) -> None:
        """Make messages the worker will not run visible again now, in the given order."""
        for t in items:
            if not t.active:
                continue
            if t.lost:  # not ours to release any more
                self._leave(t, State.DONE)
                continue
            self._leave(t, State.SETTLING)
            self._change_visibility(t, 0, release=True)

    def _apply_failure_policy(self, t: Tracked) -> None:
        seconds: int | None = None
        if not t.lost:
            try:
                seconds = self._s.failure_policy.visibility_after_failure(t.message)
            except Exception:
                log.exception("the failure policy raised; leaving message %s to expire", t.message_id)
        if seconds is None:
            self._leave(t, State.DONE)
            return
        seconds = max(0, min(int(seconds), seconds_left_under_cap(t, self._clock.now_ms())))
        self._leave(t, State.SETTLING)
        self._change_visibility(t, seconds, release=False)

    def _change_visibility(self, t: Tracked, seconds: int, release: bool) -> None:
        entry = (t, seconds, release)
        if t.extension is not None and not t.extension.done():
            # An extension for it is on its way; sent now, this change could land first and be undone.
            t.extension.add_done_callback(lambda _: self._changes.add(entry))
        else:
            self._changes.add(entry)

    async def _send_changes(self, chunk: list[tuple[Tracked, int, bool]]) -> None:
        try:
            outcomes = await sqs_calls.change_visibility(self._io, self._client, self._s.queue_url,
                                                         [(t.receipt_handle, seconds) for t, seconds, _ in chunk])
        except Exception as exc:  # noqa: BLE001 - reported; the messages come back when their visibility ends
            self._reporter.error("ChangeMessageVisibilityBatch", exc)
            outcomes = [{"Code": type(exc).__name__, "Message": str(exc)}] * len(chunk)
        for (t, seconds, release), failure in zip(chunk, outcomes, strict=True):
            if failure is None and release:
                self._reporter.released(t.message)
            elif failure is not None:
                log.warning("could not set the visibility of message %s to %d s: %s", t.message_id, seconds,
                            sqs_calls.describe_failure(failure))
            self._leave(t, State.DONE)

    async def _send_deletes(self, chunk: list[Tracked]) -> None:
        try:
            outcomes = await sqs_calls.delete(self._io, self._client, self._s.queue_url,
                                              [t.receipt_handle for t in chunk])
        except Exception as exc:  # noqa: BLE001 - reported; the messages come back when their visibility ends
            self._reporter.error("DeleteMessageBatch", exc)
            outcomes = [{"Code": type(exc).__name__, "Message": str(exc)}] * len(chunk)
        for t, failure in zip(chunk, outcomes, strict=True):
            if failure is None:
                self._reporter.deleted(t.message)
            else:
                log.warning("could not delete message %s: %s", t.message_id, sqs_calls.describe_failure(failure))
            self._leave(t, State.DONE)
