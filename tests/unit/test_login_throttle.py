"""The console's login throttle: token buckets on the server's clock, and a bounded number of them."""

from __future__ import annotations

from queueserver.clock import ManualClock
from queueserver.console import throttle
from queueserver.console.throttle import BURST, KEPT, REFILL_SECONDS, LoginThrottle


def test_a_bucket_allows_its_burst_then_one_attempt_per_refill_and_an_empty_one_takes_nothing() -> None:
    clock = ManualClock(0)
    gate = LoginThrottle(clock)
    assert [gate.take("key a", "address 1") for _ in range(BURST)] == [None] * BURST
    assert gate.take("key a", "address 1") == REFILL_SECONDS
    assert gate.take("key b", "address 1") == REFILL_SECONDS  # the address is empty too: nothing taken from b
    clock.advance(int(REFILL_SECONDS * 1000))
    assert gate.take("key a", "address 1") is None
    assert gate.take("key a", "address 1") == REFILL_SECONDS
    assert gate.take("key b", "address 2") is None  # b still has its whole burst
    gate.give_back("key b", "address 2")
    assert [gate.take("key b", "address 2") for _ in range(BURST)] == [None] * BURST


def test_the_buckets_kept_are_bounded_and_the_least_recently_used_go_first(monkeypatch) -> None:
    monkeypatch.setattr(throttle, "KEPT", 100)
    gate = LoginThrottle(ManualClock(0))
    for _ in range(BURST):
        gate.take("key attacked")
    for i in range(1000):
        gate.take(f"address {i}")
        if i % 50 == 0:
            assert gate.take("key attacked") is not None  # refused, and kept as just used
    assert len(gate._buckets) == 100
    assert gate.take("key attacked") is not None  # never dropped: still empty
    assert gate.take("address 0") is None  # dropped long ago: a fresh bucket
    assert KEPT == 10_000
