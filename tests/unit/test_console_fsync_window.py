"""The console's fsync latency: percentiles read from the syncer's histogram, over the window it has seen."""

from __future__ import annotations

from queueserver.console.views import FsyncWindow
from queueserver.tallies import FSYNC_BOUNDS, Histogram


def test_the_median_and_99th_percentile_are_the_bounds_of_the_buckets_holding_them() -> None:
    histogram = Histogram(FSYNC_BOUNDS)
    for _ in range(98):
        histogram.observe(0.0004)  # the 0.5 ms bucket
    histogram.observe(0.02)  # the 25 ms bucket
    histogram.observe(3.0)  # above every bound
    fsync = FsyncWindow().latency(histogram)
    assert (fsync.window, fsync.syncs, fsync.p50, fsync.p99) == ("since the start", 100, "≤ 0.5 ms", "≤ 25 ms")
    histogram.observe(3.0)
    histogram.observe(3.0)
    assert FsyncWindow().latency(histogram).p99 == "> 1000 ms"


def test_no_syncs_have_no_percentiles() -> None:
    fsync = FsyncWindow().latency(Histogram(FSYNC_BOUNDS))
    assert (fsync.syncs, fsync.p50, fsync.p99) == (0, "–", "–")


def test_after_a_few_minutes_only_the_syncs_of_the_window_count() -> None:
    now = [1000.0]
    window = FsyncWindow(lambda: now[0])
    histogram = Histogram(FSYNC_BOUNDS)
    for _ in range(50):
        histogram.observe(0.2)  # slow syncs, then the window moves past them
    assert window.latency(histogram).p50 == "≤ 250 ms"
    now[0] += 180
    for _ in range(10):
        histogram.observe(0.0002)
    fsync = window.latency(histogram)
    assert (fsync.window, fsync.syncs, fsync.p50) == ("the last 3 min", 10, "≤ 0.25 ms")
