"""Login attempts, throttled per access key id and per client address across every connection.

A token bucket each: `BURST` attempts at once, then one every `REFILL_SECONDS`. An attempt takes a
token from both of its buckets before its secret is compared, so parallel attempts are counted as
they arrive, not after their answers; a successful login gives its tokens back, so only failures
use them up. The buckets live on the server's clock (a test moves it) and at most `KEPT` of them
are kept: the least recently used go first, and a bucket that refilled is as good as a new one.
"""

from __future__ import annotations

from collections import OrderedDict

from queueserver.clock import Clock

BURST = 10
REFILL_SECONDS = 6.0
KEPT = 10_000


class LoginThrottle:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, int]] = OrderedDict()  # name -> (tokens, at ms)

    def take(self, *names: str) -> float | None:
        """Take a token from each named bucket; or, if one is empty, none, and the seconds until it refills."""
        now = self._clock.now_ms()
        levels = [self._level(name, now) for name in names]
        short = min(levels)
        taken = 0 if short < 1 else 1
        for name, level in zip(names, levels):  # kept as just used either way: a bucket under attack stays
            self._set(name, level - taken, now)
        return (1 - short) * REFILL_SECONDS if not taken else None

    def give_back(self, *names: str) -> None:
        now = self._clock.now_ms()
        for name in names:
            self._set(name, min(BURST, self._level(name, now) + 1), now)

    def _level(self, name: str, now: int) -> float:
        tokens, at = self._buckets.get(name, (BURST, now))
        return min(BURST, tokens + max(0, now - at) / 1000 / REFILL_SECONDS)

    def _set(self, name: str, tokens: float, now: int) -> None:
        self._buckets[name] = (tokens, now)
        self._buckets.move_to_end(name)
        while len(self._buckets) > KEPT:
            self._buckets.popitem(last=False)
