"""A body shared by a queue and its subscriptions is counted by its deliveries: QueueEngine
in-process on a real SQLite file and a manual clock, through the paths the wire tests cannot drive
at will (the retention sweep, a second dead-letter move of a body shared in between), the rows
counted in the file after each step."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, Awaitable, Callable

from queueserver.clock import ManualClock
from queueserver.models import NewMessage, Queue
from queueserver.protocol import queue_attributes
from queueserver.storage import QueueEngine


def run(path: Path, scenario: Callable[[QueueEngine, ManualClock], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        clock = ManualClock(start_ms=1_000_000)
        engine = await QueueEngine.open(str(path), clock)
        try:
            return await scenario(engine, clock)
        finally:
            await engine.close()

    return asyncio.run(main())


def bodies_in(path: Path) -> list[tuple[str, int | None]]:
    """(body, deliveries) of every stored body, read from the file."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT body, deliveries FROM message_bodies ORDER BY body, deliveries").fetchall()


async def make_queue(engine: QueueEngine, name: str, **attributes: str) -> Queue:
    merged = queue_attributes.apply(queue_attributes.DEFAULTS, attributes)
    return await engine.create_queue("us-east-1", "000000000000", name, fifo=False, attributes=merged,
                                     supplied=attributes, tags={})


async def receive_all(engine: QueueEngine, queue: Queue, visibility: int = 30) -> list[Any]:
    return await engine.receive_messages(queue, max_messages=10, visibility_timeout=visibility, wait_seconds=0)


def test_the_retention_sweep_takes_a_shared_body_only_with_the_last_delivery_it_expires(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    sent = [f"m{i}" for i in range(10)]

    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine, "q", MessageRetentionPeriod="60")
        short = await engine.create_subscription(queue, "short", start_from_all=False)  # inherits 60 s
        long = await engine.create_subscription(queue, "long", start_from_all=False)
        await engine.update_queue(long, lambda attributes, tags: (
            {**attributes, "MessageRetentionPeriod": "120"}, tags))
        await engine.send_messages(queue, [NewMessage(body=b, md5_of_body="x", delay_seconds=0) for b in sent],
                                   sender_id="me")
        taken = await receive_all(engine, short)
        await engine.delete_messages(short, [m.receipt_handle for m in taken[:4]])  # 4 deleted, 6 in flight
        assert bodies_in(db) == [(b, 2) for b in sent[:4]] + [(b, 3) for b in sent[4:]]
        clock.advance(60_000)
        assert await engine.sweep_expired() == 10 + 6  # the queue's and short's; long keeps its 10
        assert bodies_in(db) == [(b, 1) for b in sent]
        assert sorted(m.body for m in await receive_all(engine, long)) == sent  # every body intact
        clock.advance(60_000)
        assert await engine.sweep_expired() == 10
        assert bodies_in(db) == []

    run(db, scenario)


def test_a_delivery_dead_lettered_again_after_a_new_subscription_shared_its_copy_leaves_the_others_untouched(
        tmp_path: Path) -> None:
    db = tmp_path / "q.db"

    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        dead = await make_queue(engine, "dead")
        queue = await make_queue(engine, "q", RedrivePolicy=f'{{"deadLetterTargetArn":"{dead.arn}",'
                                                            '"maxReceiveCount":"1"}')
        first = await engine.create_subscription(queue, "first", start_from_all=False)
        await engine.send_messages(queue, [NewMessage(body="poison", md5_of_body="x", delay_seconds=0)],
                                   sender_id="me")

        async def dead_letter_the_queues_own() -> None:
            assert len(await receive_all(engine, queue, visibility=1)) == 1
            clock.advance(2_000)
            assert await receive_all(engine, queue) == []  # moved by this receive

        await dead_letter_the_queues_own()
        assert bodies_in(db) == [("poison", 1), ("poison", 1)]  # first's, and the dead-lettered copy
        await engine.start_move_task(dead, destination_arn=None, rate=None)  # back to the queue
        for _ in range(1_000):
            if (await engine.queue_counts(queue)).visible == 1:
                break
            await asyncio.sleep(0.01)
        assert (await engine.queue_counts(queue)).visible == 1
        later = await engine.create_subscription(queue, "later", start_from_all=True)  # shares the copy now
        assert bodies_in(db) == [("poison", 1), ("poison", 2)]
        await dead_letter_the_queues_own()
        assert bodies_in(db) == [("poison", 1), ("poison", 1), ("poison", 1)]

        [moved] = await receive_all(engine, dead)
        assert moved.dead_letter_source_arn == queue.arn
        for receiver in (first, later):
            [delivered] = await receive_all(engine, receiver)
            assert (delivered.body, delivered.dead_letter_source_arn) == ("poison", None)
            await engine.delete_messages(receiver, [delivered.receipt_handle])
        await engine.delete_messages(dead, [moved.receipt_handle])
        assert bodies_in(db) == []

    run(db, scenario)
