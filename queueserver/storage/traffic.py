"""Messages sent and received per queue per minute, kept in memory for the console's sparklines.

Counted where the engine stores or hands out messages (a dict update per call, no I/O), so an
open console reads them for free; they start empty at each start, as a live view may.
"""

from __future__ import annotations

from collections import deque

MINUTES = 15  # the console's sparkline span
SENT, RECEIVED = 1, 2  # the columns of a bucket [minute, sent, received]


class Traffic:
    def __init__(self, minutes: int = MINUTES) -> None:
        self._minutes = minutes
        # queue id -> deque of [minute, sent, received], oldest first, at most `minutes` long
        self._series: dict[int, deque[list[int]]] = {}

    def _bucket(self, queue_id: int, now_ms: int) -> list[int]:
        minute = now_ms // 60_000
        series = self._series.get(queue_id)
        if series is None:
            series = self._series[queue_id] = deque(maxlen=self._minutes)
        if not series or series[-1][0] != minute:
            series.append([minute, 0, 0])
        return series[-1]

    def add(self, queue_id: int, column: int, count: int, now_ms: int) -> None:
        """Count `count` messages SENT or RECEIVED now; inline for the current minute (it runs per request)."""
        series = self._series.get(queue_id)
        if series and series[-1][0] == now_ms // 60_000:
            series[-1][column] += count
        elif count:
            self._bucket(queue_id, now_ms)[column] += count

    def forget(self, queue_id: int) -> None:
        self._series.pop(queue_id, None)

    def per_minute(self, queue_id: int, now_ms: int) -> tuple[list[int], list[int]]:
        """(sent, received) for each of the last `minutes` minutes, oldest first, the current one last."""
        current = now_ms // 60_000
        sent = [0] * self._minutes
        received = [0] * self._minutes
        for minute, s, r in self._series.get(queue_id, ()):
            index = self._minutes - 1 - (current - minute)
            if 0 <= index < self._minutes:
                sent[index], received[index] = s, r
        return sent, received
