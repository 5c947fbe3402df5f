"""Graceful shutdown: no message is lost, or left invisible for a whole timeout, because a worker stopped.

"At once" below means without moving the server's test clock: a message another
consumer receives then was made visible by the worker, not by its timeout running out.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from support.sqs import visible_and_in_flight
from support.workers import WAIT_TIMEOUT_S, ThreadSafeManualClock, receive_now, wait_for


def test_a_stop_releases_prefetched_messages_so_another_consumer_gets_them_at_once(
        worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)])
    started, finish = threading.Event(), threading.Event()
    handled: list[str] = []

    def handler(message: dict[str, Any]) -> None:
        handled.append(message["Body"])
        started.set()
        assert finish.wait(WAIT_TIMEOUT_S)

    worker = start_worker(worker_sqs, url, handler, max_concurrency=1, prefetch=4, max_messages=5)
    try:
        wait_for(started.is_set, "the first handler to start")
        wait_for(lambda: worker.counters.received == 5, "five messages received")
        worker.stop()
        wait_for(lambda: worker.counters.released == 4, "the four prefetched messages to be released")
        others = receive_now(worker_sqs, url)
        assert sorted(m["Body"] for m in others) == sorted({f"m{i}" for i in range(5)} - set(handled))
    finally:
        finish.set()
    assert worker.join(timeout=WAIT_TIMEOUT_S)
    assert (worker.counters.succeeded, worker.counters.deleted, worker.counters.released) == (1, 1, 4)
    assert len(handled) == 1
    assert visible_and_in_flight(worker_sqs, url) == (0, 4), "only the other consumer's four remain"


def test_a_handler_running_at_a_stop_finishes_within_the_grace_period_and_its_message_is_deleted(
        worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message(QueueUrl=url, MessageBody="in progress")
    started, finish = threading.Event(), threading.Event()

    def handler(message: dict[str, Any]) -> None:
        started.set()
        assert finish.wait(WAIT_TIMEOUT_S)

    worker = start_worker(worker_sqs, url, handler)
    wait_for(started.is_set, "the handler to start")
    worker.stop()
    assert not worker.join(timeout=0.2), "the worker waits for its running handler"
    finish.set()
    assert worker.join(timeout=WAIT_TIMEOUT_S)
    assert (worker.counters.succeeded, worker.counters.deleted, worker.counters.abandoned) == (1, 1, 0)
    assert visible_and_in_flight(worker_sqs, url) == (0, 0)


def test_an_async_handler_still_running_after_the_grace_period_is_cancelled_and_its_message_released(
        worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message(QueueUrl=url, MessageBody="too slow")
    started = threading.Event()
    cancelled = threading.Event()

    async def handler(message: dict[str, Any]) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # never done on its own
        except asyncio.CancelledError:
            cancelled.set()
            raise

    clock = ThreadSafeManualClock()
    # One slot, taken: no long poll is in flight to snatch the released message back.
    worker = start_worker(worker_sqs, url, handler, clock=clock, shutdown_grace_period=10, max_concurrency=1)
    wait_for(started.is_set, "the handler to start")
    worker.stop()

    def grace_over() -> bool:
        clock.advance(10)  # the worker's clock only; the grace timer starts once the stop is seen
        return worker.counters.abandoned == 1

    wait_for(grace_over, "the grace period to end")
    assert worker.join(timeout=WAIT_TIMEOUT_S)
    assert cancelled.is_set()
    assert worker.counters.released == 1
    assert [m["Body"] for m in receive_now(worker_sqs, url)] == ["too slow"]


def test_a_sync_handler_stuck_past_the_grace_period_does_not_keep_the_worker_or_its_message(
        worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message(QueueUrl=url, MessageBody="stuck")
    started, finish = threading.Event(), threading.Event()

    def handler(message: dict[str, Any]) -> None:
        started.set()
        finish.wait(WAIT_TIMEOUT_S)

    clock = ThreadSafeManualClock()
    worker = start_worker(worker_sqs, url, handler, clock=clock, shutdown_grace_period=10, max_concurrency=1)
    try:
        wait_for(started.is_set, "the handler to start")
        worker.stop()

        def grace_over() -> bool:
            clock.advance(10)
            return worker.counters.abandoned == 1

        wait_for(grace_over, "the grace period to end")
        assert worker.join(timeout=WAIT_TIMEOUT_S), "the worker returned while its handler's thread runs on"
        assert worker.counters.released == 1
        assert [m["Body"] for m in receive_now(worker_sqs, url)] == ["stuck"]
    finally:
        finish.set()


def test_messages_returned_by_the_receive_in_flight_at_a_stop_are_released(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    receiving = threading.Event()
    worker_sqs.meta.events.register("before-send.sqs.ReceiveMessage", lambda **_: receiving.set())
    handled: list[str] = []
    worker = start_worker(worker_sqs, url, lambda message: handled.append(message["Body"]), wait_time_seconds=20)
    wait_for(receiving.is_set, "the worker's long poll")
    worker.stop()  # the long poll cannot be cancelled: whatever it returns must be released
    worker_sqs.send_message(QueueUrl=url, MessageBody="arrived during the stop")
    assert worker.join(timeout=WAIT_TIMEOUT_S)
    assert handled == []
    assert worker.counters.received == worker.counters.released
    assert [m["Body"] for m in receive_now(worker_sqs, url)] == ["arrived during the stop"]


def test_a_worker_stopped_before_it_starts_receives_nothing(worker_sqs, make_worker_queue):
    from queueserver.consumer import Worker

    url = make_worker_queue()
    worker_sqs.send_message(QueueUrl=url, MessageBody="untouched")
    worker = Worker(worker_sqs, url, lambda message: None)
    worker.stop()
    worker.start()
    assert worker.join(timeout=WAIT_TIMEOUT_S)
    assert worker.counters.received == 0
    assert visible_and_in_flight(worker_sqs, url) == (1, 0)
