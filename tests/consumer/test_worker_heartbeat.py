"""The visibility heartbeat, against the real server.

Most tests move the worker's clock and the server's test clock together (LockstepClock),
so three visibility timeouts pass in milliseconds; two run on real time against the
real-clock server, to show the default monotonic clock doing the same.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from support.sqs import visible_and_in_flight
from support.workers import WAIT_TIMEOUT_S, queue_factory, receive_now, wait_for

from queueserver.consumer import WorkerHooks


class BlockingHandler:
    """A sync handler that holds its message until the test lets it go."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.finish = threading.Event()
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, message: dict[str, Any]) -> None:
        with self._lock:
            self.count += 1
        self.started.set()
        if not self.finish.wait(WAIT_TIMEOUT_S * 4):
            raise TimeoutError("the test never let the handler finish")


def test_a_handler_running_three_times_the_visibility_timeout_is_never_seen_by_a_second_consumer(
        worker_sqs, make_worker_queue, lockstep, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message(QueueUrl=url, MessageBody="long job")
    handler = BlockingHandler()
    worker = start_worker(worker_sqs, url, handler, clock=lockstep, visibility_timeout=30)
    try:
        wait_for(handler.started.is_set, "the handler to start")
        for _ in range(23):  # 23 x 4 s = 92 s, over three visibility timeouts
            rounds = worker.counters.heartbeats
            lockstep.advance_both(4)
            wait_for(lambda: worker.counters.heartbeats > rounds, "a heartbeat round")  # noqa: B023
            assert receive_now(worker_sqs, url) == [], "a second consumer saw the message while its handler ran"
    finally:
        handler.finish.set()
    wait_for(lambda: worker.counters.deleted == 1, "the delete")
    assert worker.counters.extended == 3  # at 28, 56 and 84 s: each time less than 5 s was left
    assert worker.counters.lost == 0
    lockstep.advance_both(120)
    assert receive_now(worker_sqs, url) == []
    assert handler.count == 1


def test_with_the_heartbeat_off_a_long_handlers_message_reappears_when_its_visibility_ends(
        worker_sqs, make_worker_queue, lockstep, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message(QueueUrl=url, MessageBody="long job")
    handler = BlockingHandler()
    worker = start_worker(worker_sqs, url, handler, clock=lockstep, visibility_timeout=30, heartbeat_interval=0,
                          max_concurrency=1)  # holding one message, the worker does not compete with the test
    try:
        wait_for(handler.started.is_set, "the handler to start")
        seen_at, elapsed = None, 0
        while elapsed < 92 and seen_at is None:
            lockstep.advance_both(4)
            elapsed += 4
            if receive_now(worker_sqs, url, VisibilityTimeout=600):
                seen_at = elapsed
    finally:
        handler.finish.set()
    assert seen_at == 32, "the message should reappear at the first look after its 30 s ended"
    assert worker.counters.extended == 0
    assert worker.counters.heartbeats == 0


def test_on_real_clocks_the_heartbeat_hides_a_six_second_handlers_message_past_its_two_second_visibility(
        real_sqs, real_clock_server, start_worker):
    url = queue_factory(real_sqs)()
    real_sqs.send_message(QueueUrl=url, MessageBody="six seconds of work")
    handler = BlockingHandler()
    worker = start_worker(real_sqs, url, handler, visibility_timeout=2, extension_threshold=1.5,
                          heartbeat_interval=0.2)
    try:
        wait_for(handler.started.is_set, "the handler to start")
        until = time.monotonic() + 6.0  # three visibility timeouts
        while time.monotonic() < until:
            seen = real_sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
            assert seen == [], "a second consumer saw the message while its handler ran"
    finally:
        handler.finish.set()
    wait_for(lambda: worker.counters.deleted == 1, "the delete")
    assert worker.counters.extended >= 2
    assert worker.counters.lost == 0


def test_on_real_clocks_without_the_heartbeat_a_long_handlers_message_is_seen_by_a_second_consumer(
        real_sqs, real_clock_server, start_worker):
    url = queue_factory(real_sqs)()
    real_sqs.send_message(QueueUrl=url, MessageBody="six seconds of work")
    handler = BlockingHandler()
    worker = start_worker(real_sqs, url, handler, visibility_timeout=2, heartbeat_interval=None,
                          max_concurrency=1)  # holding one message, the worker does not compete with the test
    try:
        wait_for(handler.started.is_set, "the handler to start")
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while not seen and time.monotonic() < deadline:
            seen = real_sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
        assert len(seen) == 1, "the message should reappear once its 2 s visibility ended"
        assert seen[0]["Body"] == "six seconds of work"
    finally:
        handler.finish.set()
    assert worker.counters.extended == 0


class LostRecorder(WorkerHooks):
    def __init__(self) -> None:
        self.lost: list[tuple[str, str]] = []

    def on_lost(self, message: dict[str, Any], reason: str) -> None:
        self.lost.append((message["MessageId"], reason))


def test_a_message_whose_receipt_handle_became_invalid_is_dropped_from_tracking_and_reported(
        worker_sqs, make_worker_queue, lockstep, server_clock, start_worker):
    url = make_worker_queue()
    message_id = worker_sqs.send_message(QueueUrl=url, MessageBody="contested")["MessageId"]
    handler, hooks = BlockingHandler(), LostRecorder()
    worker = start_worker(worker_sqs, url, handler, clock=lockstep, hooks=hooks, max_concurrency=1)
    try:
        wait_for(handler.started.is_set, "the handler to start")
        server_clock.advance(31)  # only the server's clock: the worker believes it still has time
        (taken,) = receive_now(worker_sqs, url, MaxNumberOfMessages=1, VisibilityTimeout=600)
        assert taken["MessageId"] == message_id
        # Another consumer finishes it. (A handle that only rotated would still move the visibility of a
        # standard queue's message, as on AWS: only a message that is gone refuses the heartbeat.)
        worker_sqs.delete_message(QueueUrl=url, ReceiptHandle=taken["ReceiptHandle"])
        lockstep.advance(26)  # the worker's clock: 4 s left by its count, so it tries to extend
        wait_for(lambda: worker.counters.lost == 1, "the message to be reported lost")
        assert hooks.lost[0][0] == message_id
        assert "refused" in hooks.lost[0][1]
        rounds = worker.counters.heartbeats
        lockstep.advance(28)
        wait_for(lambda: worker.counters.heartbeats > rounds, "another heartbeat round")
        assert worker.counters.extended == 0, "a lost message is not extended again"
    finally:
        handler.finish.set()
    wait_for(lambda: worker.counters.succeeded == 1, "the handler to finish")
    assert visible_and_in_flight(worker_sqs, url) == (0, 0), "the other consumer deleted it"


def test_the_heartbeat_never_extends_a_message_past_the_twelve_hour_limit(
        worker_sqs, make_worker_queue, lockstep, server_clock, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message(QueueUrl=url, MessageBody="a very long job")
    handler, hooks = BlockingHandler(), LostRecorder()
    worker = start_worker(worker_sqs, url, handler, clock=lockstep, hooks=hooks, visibility_timeout=43_000,
                          max_concurrency=1)
    try:
        wait_for(handler.started.is_set, "the handler to start")
        rounds = worker.counters.heartbeats
        lockstep.advance_both(42_996)  # 4 s left of 43,000: extended, but only up to the 12 hours
        wait_for(lambda: worker.counters.heartbeats > rounds, "a heartbeat round")
        assert worker.counters.extended == 1
        rounds = worker.counters.heartbeats
        lockstep.advance_both(198)  # 43,194 s since the receive: nothing more may be added
        wait_for(lambda: worker.counters.heartbeats > rounds, "a heartbeat round")
        assert worker.counters.extended == 1
        assert worker.counters.lost == 1
        assert "12-hour" in hooks.lost[0][1]
        assert worker.counters.errors == 0, "no request SQS would refuse was sent"
        assert receive_now(worker_sqs, url) == [], "the last extension still runs"
        server_clock.advance(6)  # 43,200 s: the 12 hours are over
        assert len(receive_now(worker_sqs, url)) == 1
    finally:
        handler.finish.set()


def test_extensions_go_out_ten_per_change_message_visibility_batch_call(
        worker_sqs, make_worker_queue, lockstep, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)])
    worker_sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"n{i}"} for i in range(2)])
    batches: list[int] = []
    worker_sqs.meta.events.register("before-parameter-build.sqs.ChangeMessageVisibilityBatch",
                             lambda params, **_: batches.append(len(params["Entries"])))
    handler = BlockingHandler()
    worker = start_worker(worker_sqs, url, handler, clock=lockstep, max_concurrency=12)
    try:
        wait_for(lambda: handler.count == 12, "twelve handlers to start")
        rounds = worker.counters.heartbeats
        lockstep.advance_both(26)
        wait_for(lambda: worker.counters.heartbeats > rounds, "a heartbeat round")
    finally:
        handler.finish.set()
    assert sorted(batches) == [2, 10]
    assert worker.counters.extended == 12
    wait_for(lambda: worker.counters.deleted == 12, "the deletes")
