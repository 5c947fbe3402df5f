"""The visibility heartbeat: keeps the messages a worker holds invisible for as long as it needs them.

Every `interval`, messages with less than `threshold` of visibility left are extended
back to the full visibility timeout, ten per ChangeMessageVisibilityBatch call. Why
"remaining below a threshold" rather than "every N seconds": a worker holding many
messages then makes calls only for those near their end, and a handler that
finishes early never costs an extension at all.

SQS allows at most 12 hours of visibility in total since a receive; an extension is
cut to what is left of that (minus a safety margin for the trip to SQS), and a
message that cannot be extended any further is reported lost, never sent a request
SQS would refuse. A message whose extension SQS refuses (its receipt handle became
invalid, or it is no longer in flight) is dropped from tracking and reported.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from queueserver.consumer.hooks import Reporter
from queueserver.consumer.policies import MAX_VISIBILITY_SECONDS
from queueserver.consumer.sqs_calls import (
    BATCH_SIZE,
    Io,
    change_visibility,
    describe_failure,
)
from queueserver.consumer.timing import Clock, sleep_until
from queueserver.consumer.tracking import Tracked

log = logging.getLogger(__name__)

# Our clock starts a message's 12 hours before SQS's does (read before the receive was sent),
# but an extension reaches SQS a little after we read the clock; this margin covers that trip.
CAP_SAFETY_MARGIN_MS = 2_000


def seconds_left_under_cap(t: Tracked, now_ms: int) -> int:
    """Whole seconds of visibility SQS still allows for `t`, counted from `now_ms`."""
    allowed_ms = MAX_VISIBILITY_SECONDS * 1000 - (now_ms - t.received_at_ms) - CAP_SAFETY_MARGIN_MS
    return max(0, allowed_ms // 1000)


class Heartbeat:
    """Extends what is about to expire, once per interval, until stopped."""

    def __init__(self, *, clock: Clock, interval_s: float, threshold_s: float, visibility_timeout: int,
                 tracked: Callable[[], Iterable[Tracked]], io: Io, client: Any, queue_url: str,
                 reporter: Reporter) -> None:
        self._clock = clock
        self._interval_ms = max(1, round(interval_s * 1000))
        self._threshold_ms = round(threshold_s * 1000)
        self._visibility_timeout = visibility_timeout
        self._tracked = tracked
        self._io = io
        self._client = client
        self._queue_url = queue_url
        self._reporter = reporter
        self._stop = asyncio.Event()

    def stop(self) -> None:
        """End after the round in progress (so no extension is left racing a later release)."""
        self._stop.set()

    async def run(self) -> None:
        # The next round is planned from the end of the last one: after a stall (or a test
        # moving the clock by minutes) the heartbeat does one round, not a burst of them.
        while await sleep_until(self._clock, self._clock.now_ms() + self._interval_ms, self._stop):
            try:
                await self.beat()
            except Exception:
                log.exception("heartbeat round failed unexpectedly")

    async def beat(self) -> None:
        """One round: extend every tracked message whose remaining visibility is below the threshold."""
        now = self._clock.now_ms()
        due = [t for t in self._tracked()
               if t.active and not t.lost and t.extension is None and t.deadline_ms - now < self._threshold_ms]
        plan: list[tuple[Tracked, int]] = []
        for t in due:
            seconds = min(self._visibility_timeout, seconds_left_under_cap(t, now))
            if seconds * 1000 <= t.deadline_ms - now:
                t.lost = True
                self._reporter.lost(t.message, "it reached SQS's 12-hour visibility limit")
            else:
                plan.append((t, seconds))
        chunks = [plan[i:i + BATCH_SIZE] for i in range(0, len(plan), BATCH_SIZE)]
        extended = await asyncio.gather(*(self._extend(chunk, now) for chunk in chunks))
        self._reporter.heartbeat(len(due), sum(extended))

    async def _extend(self, chunk: list[tuple[Tracked, int]], now: int) -> int:
        loop = asyncio.get_running_loop()
        for t, _ in chunk:
            t.extension = loop.create_future()  # a release of this message waits for it
        try:
            outcomes = await change_visibility(self._io, self._client, self._queue_url,
                                               [(t.receipt_handle, seconds) for t, seconds in chunk])
        except Exception as exc:  # noqa: BLE001 - any failure of the call: the next round retries
            self._reporter.error("ChangeMessageVisibilityBatch", exc)
            return 0  # kept tracked: the next round tries again
        finally:
            for t, _ in chunk:
                if t.extension is not None:
                    t.extension.set_result(None)
                    t.extension = None
        extended = 0
        for (t, seconds), failure in zip(chunk, outcomes):
            if failure is None:
                t.deadline_ms = now + seconds * 1000
                extended += 1
                self._reporter.extended(t.message, seconds)
            elif not t.active:
                pass  # it was settled (deleted, released) while the extension was on its way
            elif failure.get("SenderFault", True):
                t.lost = True
                self._reporter.lost(t.message, f"SQS refused to extend it ({describe_failure(failure)})")
            else:
                log.warning("extending message %s failed on SQS's side (%s); retrying next round",
                            t.message_id, describe_failure(failure))
        return extended
