"""QueueEngine in-process on a real SQLite file and a manual clock."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from queueserver import errors
from queueserver.clock import ManualClock, SystemClock
from queueserver.models import NewMessage, StoredMessage, VisibilityChange
from queueserver.protocol import queue_attributes
from queueserver.storage import QueueEngine, group_claims

Scenario = Callable[[QueueEngine, ManualClock], Awaitable[Any]]


def run(tmp_path: Path, scenario: Scenario) -> Any:
    async def main() -> Any:
        clock = ManualClock(start_ms=1_000_000)
        engine = await QueueEngine.open(str(tmp_path / "q.db"), clock)
        try:
            return await scenario(engine, clock)
        finally:
            await engine.close()

    return asyncio.run(main())


async def make_queue(engine: QueueEngine, name: str = "q", **attributes: str):
    merged = queue_attributes.apply(queue_attributes.DEFAULTS, attributes)
    return await engine.create_queue("us-east-1", "000000000000", name, fifo=False, attributes=merged,
                                     supplied=attributes, tags={})


def message(body: str = "hello", delay: int = 0) -> NewMessage:
    return NewMessage(body=body, md5_of_body="x", delay_seconds=delay)


def test_a_received_message_is_hidden_until_its_visibility_ends(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine)
        await engine.send_messages(queue, [message()], sender_id="me")
        [first] = await engine.receive_messages(queue, max_messages=10, visibility_timeout=30, wait_seconds=0)
        assert await engine.receive_messages(queue, max_messages=10, visibility_timeout=30, wait_seconds=0) == []
        clock.advance(29_999)
        assert await engine.receive_messages(queue, max_messages=10, visibility_timeout=30, wait_seconds=0) == []
        clock.advance(1)
        [again] = await engine.receive_messages(queue, max_messages=10, visibility_timeout=30, wait_seconds=0)
        assert again.message_id == first.message_id
        assert again.receive_count == 2
        assert again.receipt_handle != first.receipt_handle

    run(tmp_path, scenario)


def test_visibility_can_not_be_extended_past_twelve_hours_from_the_receive(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine)
        await engine.send_messages(queue, [message()], sender_id="me")
        [received] = await engine.receive_messages(queue, max_messages=1, visibility_timeout=43_200, wait_seconds=0)
        clock.advance(3_600_000)
        [outcome] = await engine.change_visibility(queue, [VisibilityChange(received.receipt_handle, 39_600)])
        assert outcome.error is None
        [outcome] = await engine.change_visibility(queue, [VisibilityChange(received.receipt_handle, 39_601)])
        assert isinstance(outcome.error, errors.InvalidParameterValue)
        assert "Total VisibilityTimeout" in outcome.error.message

    run(tmp_path, scenario)


def test_a_message_past_retention_is_never_delivered_and_is_swept(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine, MessageRetentionPeriod="60")
        await engine.send_messages(queue, [message()], sender_id="me")
        clock.advance(60_000)
        assert await engine.receive_messages(queue, max_messages=10, visibility_timeout=30, wait_seconds=0) == []
        assert (await engine.queue_counts(queue)).visible == 0
        assert await engine.sweep_expired() == 1

    run(tmp_path, scenario)


def test_a_sweep_removes_a_queues_expired_messages_oldest_first_and_keeps_every_unexpired_one(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine, MessageRetentionPeriod="60")
        await engine.send_messages(queue, [message("old")] * 3, sender_id="me")
        clock.advance(30_000)
        await engine.send_messages(queue, [message("new")] * 2, sender_id="me")
        clock.advance(30_000)  # the first three expire now, the last two in 30 s
        assert await engine.sweep_expired() == 3
        assert await engine.sweep_expired() == 0
        counts = await engine.queue_counts(queue)
        assert (counts.visible, counts.oldest_enqueued_at_ms) == (2, 1_030_000)
        received = await engine.receive_messages(queue, max_messages=10, visibility_timeout=30, wait_seconds=0)
        assert sorted(m.body for m in received) == ["new", "new"]
        clock.advance(30_000)
        assert await engine.sweep_expired() == 2  # in flight or not, past retention is gone

    run(tmp_path, scenario)


def test_a_sweep_passes_over_unexpired_messages_whose_retention_restarted_to_the_expired_ones_behind(
        tmp_path: Path) -> None:
    """A redriven message keeps its row (older than messages sent after it) but starts its retention again."""
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        dead = await make_queue(engine, "dead", MessageRetentionPeriod="1209600")
        queue = await make_queue(engine, "q", MessageRetentionPeriod="60", RedrivePolicy=(
            '{"deadLetterTargetArn":"%s","maxReceiveCount":"1"}' % dead.arn))
        await engine.send_messages(queue, [message("redriven")], sender_id="me")
        [received] = await engine.receive_messages(queue, max_messages=1, visibility_timeout=1, wait_seconds=0)
        clock.advance(1_000)
        assert await engine.receive_messages(queue, max_messages=1, visibility_timeout=1, wait_seconds=0) == []
        await engine.send_messages(queue, [message("expiring")] * 3, sender_id="me")  # behind it in row order
        clock.advance(30_000)
        await engine.start_move_task(dead, destination_arn=None, rate=None)
        await until(lambda: visible(engine, queue, 4))  # the move task has run
        clock.advance(30_000)  # the three expire; the redriven one's retention began at the move, 30 s ago
        assert await engine.sweep_expired() == 3
        received = await engine.receive_messages(queue, max_messages=10, visibility_timeout=30, wait_seconds=0)
        assert [m.body for m in received] == ["redriven"]

    run(tmp_path, scenario)


async def visible(engine: QueueEngine, queue: Any, count: int) -> bool:
    return (await engine.queue_counts(queue)).visible == count


async def until(condition: Callable[[], bool | Awaitable[bool]]) -> None:
    """Let the event loop and the database thread run until `condition()` holds (bounded); it may be a coroutine."""
    for _ in range(2000):
        held = condition()
        if held if isinstance(held, bool) else await held:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the database thread never got there")


def hold(running: threading.Event, go: threading.Event) -> Callable[[Any], None]:
    """An operation that keeps the database thread until `go`: what is submitted meanwhile queues as one group."""
    def op(tx: Any) -> None:
        running.set()
        assert go.wait(10), "the test never let the group finish"
    return op


async def waiting_poll(engine: QueueEngine, clock: ManualClock, queue: Any) -> asyncio.Task:
    """A long poll (20 s) that has found nothing and waits: its wake-up is pending on the clock.
    Only a poll already waiting proves a wake-up; one that began late would find the message by its claim."""
    pending = clock.pending()
    poll = asyncio.create_task(
        engine.receive_messages(queue, max_messages=1, visibility_timeout=30, wait_seconds=20))
    await until(lambda: clock.pending() == pending + 1)
    assert not poll.done()
    return poll


def test_a_sweep_of_a_batch_of_queues_goes_on_from_where_the_last_one_stopped(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        for name in ("a", "b", "c", "d", "e"):
            queue = await make_queue(engine, name, MessageRetentionPeriod="60")
            await engine.send_messages(queue, [message()] * 2, sender_id="me")
        clock.advance(60_000)
        assert [await engine.sweep_expired(batch=2) for _ in range(4)] == [4, 4, 2, 0]  # round again: none left
        late = await make_queue(engine, "f", MessageRetentionPeriod="60")
        await engine.send_messages(late, [message()], sender_id="me")
        clock.advance(60_000)
        assert await engine.sweep_expired() == 1  # every queue at once

    run(tmp_path, scenario)


def test_a_long_poll_wakes_when_the_clock_passes_a_delay(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine)
        await engine.send_messages(queue, [message(delay=10)], sender_id="me")
        poll = await waiting_poll(engine, clock, queue)
        clock.advance(9_999)
        assert clock.pending() == 1, "the delay has not passed: the poll's wake-up is still pending"
        clock.advance(1)
        assert clock.pending() == 0, "the clock reached the delay's end: the wake-up fired"
        received = await asyncio.wait_for(poll, 10)
        assert len(received) == 1

    run(tmp_path, scenario)


def test_a_long_poll_wakes_on_a_send(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine)
        poll = await waiting_poll(engine, clock, queue)
        await engine.send_messages(queue, [message()], sender_id="me")
        # The clock stands still and the poll's 20 s of real time are not up in 10: only the send can end it.
        assert len(await asyncio.wait_for(poll, 10)) == 1

    run(tmp_path, scenario)


def test_an_engine_opened_again_resumes_its_manual_clock_where_the_engine_moved_it(tmp_path: Path) -> None:
    async def main() -> tuple[int, int, int]:
        path = str(tmp_path / "q.db")
        first = await QueueEngine.open(path, ManualClock(start_ms=1_000_000))
        assert first.test_clock is not None
        await first.test_clock.advance(90_000)
        await first.close()
        second = await QueueEngine.open(path, ManualClock(start_ms=5_000_000))  # as a restart makes: a later reading
        resumed = second.clock.now_ms()
        await second.close()
        real = await QueueEngine.open(path, SystemClock())  # the real clock drops the kept reading
        await real.close()
        third = await QueueEngine.open(path, ManualClock(start_ms=7_000_000))
        fresh = third.clock.now_ms()
        await third.close()
        return resumed, fresh, first.clock.now_ms()

    assert asyncio.run(main()) == (1_090_000, 7_000_000, 1_090_000)


def test_a_failing_operation_does_not_roll_back_its_neighbours(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine)
        results = await asyncio.gather(
            engine.send_messages(queue, [message("a")], sender_id="me"),
            make_queue(engine, "q", VisibilityTimeout="5"),
            engine.send_messages(queue, [message("b")], sender_id="me"),
            return_exceptions=True,
        )
        assert isinstance(results[1], errors.QueueNameExists)
        assert (await engine.queue_counts(queue)).visible == 2

    run(tmp_path, scenario)


def test_a_notify_wakes_as_many_polls_as_the_messages_can_feed_plus_one() -> None:
    from queueserver.storage.waiters import Waiters

    async def main() -> tuple[int, int, int]:
        waiters = Waiters(SystemClock(), asyncio.get_running_loop())
        greedy = [waiters.register(1, appetite=10) for _ in range(5)]
        waiters.notify(1, 10)  # a batch of ten feeds one poll that takes ten
        woken_greedy = sum(w.done() for w in greedy)
        single = [waiters.register(2, appetite=1) for _ in range(15)]
        waiters.notify(2, 10)  # FIFO polls count for one message each
        woken_single = sum(w.done() for w in single)
        waiters.notify(1)  # no count: everyone
        return woken_greedy, woken_single, sum(w.done() for w in greedy)

    assert asyncio.run(main()) == (2, 11, 5)


def test_a_queue_is_seen_from_the_event_loop_only_once_its_create_has_committed(tmp_path: Path) -> None:
    """GetQueueUrl and ListQueues answer from memory: they must not report a queue whose
    CreateQueue could still roll back, or be lost in a crash before its COMMIT."""
    first_running, let_first_go, second_running, let_second_go = (threading.Event() for _ in range(4))

    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        held = asyncio.ensure_future(engine._db.run(hold(first_running, let_first_go)))
        await until(first_running.is_set)  # the database thread is busy: what comes next queues as one group
        created = asyncio.ensure_future(make_queue(engine, "new"))
        after = asyncio.ensure_future(engine._db.run(hold(second_running, let_second_go)))
        await until(lambda: engine._db._inbox.qsize() == 2)
        let_first_go.set()
        await held
        await until(second_running.is_set)  # the create has run; its group has not committed
        with pytest.raises(errors.QueueDoesNotExist):
            engine.get_queue("us-east-1", "000000000000", "new")
        assert engine.list_queues("us-east-1", "000000000000") == []
        let_second_go.set()
        await asyncio.gather(created, after)
        assert engine.get_queue("us-east-1", "000000000000", "new").name == "new"
        assert [q.name for q in engine.list_queues("us-east-1", "000000000000")] == ["new"]

    run(tmp_path, scenario)


def test_fifo_groups_beyond_a_held_backlog_are_served_in_the_order_they_became_available(tmp_path: Path) -> None:
    """A group in flight whose backlog fills the front window: the other groups are found
    through the group index, and still served in the order they became available."""
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        attributes = queue_attributes.apply(queue_attributes.DEFAULTS,
                                            {**queue_attributes.FIFO_DEFAULTS, "FifoQueue": "true"})
        queue = await engine.create_queue("us-east-1", "000000000000", "q.fifo", fifo=True, attributes=attributes,
                                           supplied={}, tags={})

        def grouped(group: str, n: int) -> NewMessage:
            return NewMessage(body=f"{group}:{n}", md5_of_body="x", delay_seconds=0, group_id=group,
                              deduplication_id=f"{group}-{n}")

        backlog = 2 * group_claims.FRONT_WINDOW
        for start in range(0, backlog, 500):
            await engine.send_messages(queue, [grouped("big", n) for n in range(start, start + 500)],
                                       sender_id="me")
        await engine.send_messages(queue, [grouped("b", 0), grouped("c", 0)], sender_id="me")

        async def receive(visibility: int) -> list[str]:
            received = await engine.receive_messages(queue, max_messages=1, visibility_timeout=visibility, wait_seconds=0)
            return [m.body for m in received]

        assert await receive(30) == ["big:0"]
        assert await receive(5) == ["b:0"]
        clock.advance(6_000)  # b is available again, behind c, which has waited since it was sent
        assert await receive(30) == ["c:0"]
        assert await receive(30) == ["b:0"]
        assert await receive(30) == []

    run(tmp_path, scenario)


def test_a_browsed_message_shows_what_a_receive_hands_out_but_the_receive_itself(tmp_path: Path) -> None:
    """Browse and receive build their messages from the same stored fields; only the receive's own
    marks differ (its count, its first receive, its handle)."""
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        queue = await make_queue(engine)
        sent = NewMessage(body="hello", md5_of_body="x", delay_seconds=0,
                          attributes={"colour": {"DataType": "String", "StringValue": "red"}},
                          trace_header="Root=1-5759e988-bd862e3fe1be46a994272793")
        await engine.send_messages(queue, [sent], sender_id="me")
        [before] = await engine.browse_messages(queue, after=0, limit=10)
        assert (before.state, before.receive_count, before.first_received_at_ms) == ("visible", 0, None)
        clock.advance(1_000)
        [received] = await engine.receive_messages(queue, max_messages=1, visibility_timeout=30, wait_seconds=0)
        [after] = await engine.browse_messages(queue, after=0, limit=10)
        assert (after.state, after.receive_count, after.first_received_at_ms) == ("in_flight", 1, clock.now_ms())
        shared = [f.name for f in dataclasses.fields(StoredMessage)]
        assert {name: getattr(after, name) for name in shared} == {name: getattr(received, name) for name in shared}
        assert received.attributes == sent.attributes and received.trace_header == sent.trace_header
        assert received.sender_id == "me" and received.sent_at_ms == clock.now_ms() - 1_000

    run(tmp_path, scenario)


def test_a_move_task_is_started_listed_and_cancelled_through_the_engine(tmp_path: Path) -> None:
    async def scenario(engine: QueueEngine, clock: ManualClock) -> None:
        dead_letters = await make_queue(engine, "dead")
        source = await make_queue(engine, "source", RedrivePolicy=f'{{"deadLetterTargetArn":"{dead_letters.arn}",'
                                                                   '"maxReceiveCount":"1"}')
        await engine.send_messages(dead_letters, [message(str(n)) for n in range(3)], sender_id="me")
        handle = await engine.start_move_task(dead_letters, destination_arn=source.arn, rate=1)  # a message a step
        [task] = await engine.list_move_tasks(dead_letters, max_results=10)
        assert (task.handle, task.source_arn, task.destination_arn, task.rate, task.to_move) == (
            handle, dead_letters.arn, source.arn, 1, 3)
        moved = await engine.cancel_move_task(handle)
        [task] = await engine.list_move_tasks(dead_letters, max_results=10)
        assert task.status in ("CANCELLING", "CANCELLED") and task.moved == moved < 3
        with pytest.raises(errors.ResourceNotFound):
            await engine.cancel_move_task(handle)

    run(tmp_path, scenario)


def test_an_in_flight_count_taken_by_a_group_that_runs_again_does_not_let_receives_past_the_limit(
        tmp_path: Path) -> None:
    """A group holding a delete, a receive that counts the messages in flight (it saw the delete) and an
    operation that fails runs again: the count from the run rolled back must not stand, or it errs low."""
    async def main() -> int:
        clock = ManualClock(start_ms=1_000_000)
        path = str(tmp_path / "q.db")
        first = await QueueEngine.open(path, clock, in_flight_limit=10)
        queue = await make_queue(first)
        await first.send_messages(queue, [message(str(i)) for i in range(10)], sender_id="me")
        held = await first.receive_messages(queue, max_messages=10, visibility_timeout=600, wait_seconds=0)
        assert len(held) == 10
        await first.close()
        engine = await QueueEngine.open(path, clock, in_flight_limit=10)  # no estimate: the next receive counts
        try:
            queue = engine.get_queue("us-east-1", "000000000000", "q")
            running, go = threading.Event(), threading.Event()

            def fails(tx: Any) -> None:
                raise errors.InvalidParameterValue("no")

            holder = asyncio.ensure_future(engine._db.run(hold(running, go)))
            await until(running.is_set)
            group = [asyncio.ensure_future(engine.delete_messages(queue, [m.receipt_handle for m in held[:3]])),
                     asyncio.ensure_future(engine.receive_messages(queue, max_messages=1, visibility_timeout=600,
                                                                   wait_seconds=0)),
                     asyncio.ensure_future(engine._db.run(fails))]
            await until(lambda: engine._db._inbox.qsize() == 3)
            go.set()
            await holder
            _, received, failed = await asyncio.gather(*group, return_exceptions=True)
            assert received == [] and isinstance(failed, errors.InvalidParameterValue)
            await engine.send_messages(queue, [message(f"more {i}") for i in range(10)], sender_id="me")
            taken = 0
            for _ in range(10):  # one at a time until the limit refuses
                try:
                    taken += len(await engine.receive_messages(queue, max_messages=1, visibility_timeout=600,
                                                               wait_seconds=0))
                except errors.OverLimit:
                    return taken
            return taken
        finally:
            await engine.close()

    assert asyncio.run(main()) == 3  # 7 in flight after the group, and the limit is 10
