"""The console's per-minute traffic counters."""

from queueserver.storage.traffic import RECEIVED, SENT, Traffic


def test_counts_land_in_their_minute_and_age_out_of_the_window() -> None:
    traffic = Traffic(minutes=3)
    traffic.add(1, SENT, 5, now_ms=0)
    traffic.add(1, SENT, 2, now_ms=59_999)
    traffic.add(1, RECEIVED, 4, now_ms=60_000)
    assert traffic.per_minute(1, now_ms=60_000) == ([0, 7, 0], [0, 0, 4])
    assert traffic.per_minute(1, now_ms=180_000) == ([0, 0, 0], [4, 0, 0])
    assert traffic.per_minute(1, now_ms=240_000) == ([0, 0, 0], [0, 0, 0])


def test_a_forgotten_queue_and_an_unknown_one_show_nothing() -> None:
    traffic = Traffic(minutes=2)
    traffic.add(7, RECEIVED, 3, now_ms=0)
    traffic.forget(7)
    assert traffic.per_minute(7, now_ms=0) == ([0, 0], [0, 0])
    assert traffic.per_minute(8, now_ms=0) == ([0, 0], [0, 0])
