"""The count cache over the real read side: a real SQLite file written by a second connection."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable

from queueserver.clock import ManualClock
from queueserver.models import QueueCounts
from queueserver.storage.count_cache import CountCache
from queueserver.storage.migrations import migrate
from queueserver.storage.read_side import ReadSide
from queueserver.storage.sqlite_file import connect

RETENTION_MS = 345_600_000
START_MS = 1_000_000_000


class Writer:
    """Another connection writing messages of queue 1, telling the cache after each commit (as the engine does)."""

    def __init__(self, path: Path) -> None:
        self.conn = connect(str(path))
        migrate(self.conn)
        self.caches: list[CountCache] = []
        self.writes = 0
        self.next_id = 1

    def send(self, count: int, visible_at_ms: int = START_MS, receive_count: int = 0) -> None:
        rows = [(self.next_id + i, 1, visible_at_ms, START_MS, receive_count) for i in range(count)]
        self.next_id += count
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, receive_count)"
                              " VALUES (?, ?, ?, ?, ?)", rows)
        self.conn.execute("COMMIT")
        self.writes += 1
        for cache in self.caches:
            cache.changed(1)


def run(tmp_path: Path, scenario: Callable[[Writer, ReadSide, ManualClock], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        writer = Writer(tmp_path / "q.db")
        reads = await ReadSide.open(str(tmp_path / "q.db"))
        try:
            return await scenario(writer, reads, ManualClock(start_ms=START_MS))
        finally:
            await reads.close()
            writer.conn.close()

    return asyncio.run(main())


def test_many_concurrent_callers_share_one_count_and_other_queues_changes_cost_nothing(tmp_path: Path) -> None:
    async def scenario(writer: Writer, reads: ReadSide, clock: ManualClock) -> None:
        writer.send(1000)
        cache = CountCache(reads.counts, clock)
        writer.caches.append(cache)
        answers = await asyncio.gather(*(cache.counts(1, RETENTION_MS) for _ in range(50)))
        assert set(answers) == {QueueCounts(visible=1000, in_flight=0, delayed=0)}
        assert cache.reads == 1
        await asyncio.gather(*(cache.counts(1, RETENTION_MS) for _ in range(50)))
        assert cache.reads == 1, "nothing changed, so nothing is counted again"
        cache.changed(2)
        await cache.counts(1, RETENTION_MS)
        assert cache.reads == 1, "a change to another queue costs this one nothing"

    run(tmp_path, scenario)


def test_a_small_queue_is_counted_again_after_every_change(tmp_path: Path) -> None:
    async def scenario(writer: Writer, reads: ReadSide, clock: ManualClock) -> None:
        cache = CountCache(reads.counts, clock)
        writer.caches.append(cache)
        assert (await cache.counts(1, RETENTION_MS)).visible == 0
        for expected in range(1, 6):
            writer.send(1)
            assert (await cache.counts(1, RETENTION_MS)).visible == expected

    run(tmp_path, scenario)


def test_a_big_queue_serves_the_last_counts_and_converges_within_max_age(tmp_path: Path) -> None:
    async def scenario(writer: Writer, reads: ReadSide, clock: ManualClock) -> None:
        # As if this small queue were a big one: counted again at most every max_age / 2.
        cache = CountCache(reads.counts, clock, max_age=1.0, small_queue=0)
        writer.caches.append(cache)
        writer.send(10)
        assert (await cache.counts(1, RETENTION_MS)).visible == 10
        writer.send(5)
        assert (await cache.counts(1, RETENTION_MS)).visible == 10, "the last counts, while the refresh waits"
        assert cache.reads == 1
        await cache.settled(1)  # the refresh runs in the background, without another call
        assert cache.reads == 2
        assert (await cache.counts(1, RETENTION_MS)).visible == 15

    run(tmp_path, scenario)


def test_counts_change_with_the_clock_alone_when_visibility_ends_a_delay_ends_or_a_message_expires(
        tmp_path: Path) -> None:
    async def scenario(writer: Writer, reads: ReadSide, clock: ManualClock) -> None:
        cache = CountCache(reads.counts, clock)
        writer.caches.append(cache)
        writer.send(2)
        writer.send(3, visible_at_ms=START_MS + 30_000, receive_count=1)  # in flight for 30 s
        writer.send(4, visible_at_ms=START_MS + 60_000)  # delayed 60 s
        assert await cache.counts(1, RETENTION_MS) == QueueCounts(visible=2, in_flight=3, delayed=4)
        clock.advance(30_000)
        assert await cache.counts(1, RETENTION_MS) == QueueCounts(visible=5, in_flight=0, delayed=4)
        clock.advance(30_000)
        assert await cache.counts(1, RETENTION_MS) == QueueCounts(visible=9, in_flight=0, delayed=0)
        assert await cache.counts(1, 60_000) == QueueCounts(visible=0, in_flight=0, delayed=0), "expired"
        assert cache.reads == 4
        assert writer.writes == 3

    run(tmp_path, scenario)


def test_counts_older_than_max_age_are_never_served_after_a_change(tmp_path: Path) -> None:
    async def scenario(writer: Writer, reads: ReadSide, clock: ManualClock) -> None:
        cache = CountCache(reads.counts, clock, max_age=0.05, small_queue=0)
        writer.caches.append(cache)
        writer.send(3)
        assert (await cache.counts(1, RETENTION_MS)).visible == 3
        await asyncio.sleep(0.06)  # the state under test is "older than max_age": only time makes it
        writer.send(4)
        assert (await cache.counts(1, RETENTION_MS)).visible == 7, "the caller waited for one count"
        assert cache.reads == 2

    run(tmp_path, scenario)
