"""Handlers: sync ones in threads, async ones on the worker's event loop; what they receive; hooks and counters."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from support.sqs import visible_and_in_flight
from support.workers import WAIT_TIMEOUT_S, wait_for

from queueserver.consumer import MakeVisibleNow, WorkerHooks


class ConcurrencyGauge:
    """Counts handlers running at once, and keeps the highest count."""

    def __init__(self) -> None:
        self.running = 0
        self.highest = 0
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.running += 1
            self.highest = max(self.highest, self.running)
            self.threads.add(threading.current_thread().name)

    def leave(self) -> None:
        with self._lock:
            self.running -= 1


def test_sync_handlers_run_in_threads_up_to_max_concurrency_at_once(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(6)])
    gauge = ConcurrencyGauge()
    together = threading.Barrier(3, timeout=WAIT_TIMEOUT_S)  # passes only when three run at once

    def handler(message: dict[str, Any]) -> None:
        gauge.enter()
        try:
            together.wait()
        finally:
            gauge.leave()

    worker = start_worker(worker_sqs, url, handler, max_concurrency=3)
    wait_for(lambda: worker.counters.deleted == 6, "six deletes")
    assert gauge.highest == 3
    assert worker.counters.failed == 0
    assert all(name.startswith("queueserver-worker-handler") for name in gauge.threads)


def test_async_handlers_run_concurrently_on_the_workers_event_loop(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    worker_sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(6)])
    gauge = ConcurrencyGauge()
    three_in: list[asyncio.Event] = []  # created on the worker's loop

    async def handler(message: dict[str, Any]) -> str:
        if not three_in:
            three_in.append(asyncio.Event())
        gauge.enter()
        try:
            if gauge.running == 3:
                three_in[0].set()
            await asyncio.wait_for(three_in[0].wait(), WAIT_TIMEOUT_S)  # passes once three ran at once
            return "any value but Outcome.FAILED is a success"
        finally:
            gauge.leave()

    worker = start_worker(worker_sqs, url, handler, max_concurrency=3)
    wait_for(lambda: worker.counters.deleted == 6, "six deletes")
    assert gauge.highest == 3
    assert gauge.threads == {"queueserver-worker"}, "async handlers run on the worker's loop thread"
    assert worker.counters.failed == 0


def test_the_handler_gets_the_message_as_boto3_returns_it(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    sent = worker_sqs.send_message(QueueUrl=url, MessageBody="hello",
                            MessageAttributes={"kind": {"DataType": "String", "StringValue": "greeting"}})
    seen: list[dict[str, Any]] = []
    worker = start_worker(worker_sqs, url, seen.append)
    wait_for(lambda: worker.counters.deleted == 1, "the delete")
    (message,) = seen
    assert message["Body"] == "hello"
    assert message["MessageId"] == sent["MessageId"]
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert message["ReceiptHandle"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    assert "SentTimestamp" in message["Attributes"]
    assert message["MessageAttributes"] == {"kind": {"DataType": "String", "StringValue": "greeting"}}


class Recorder(WorkerHooks):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_received(self, message: dict[str, Any]) -> None:
        self.events.append(("received", message["Body"]))
        raise RuntimeError("a broken hook must not break the worker")

    def on_succeeded(self, message: dict[str, Any], seconds: float) -> None:
        self.events.append(("succeeded", message["Body"]))

    def on_failed(self, message: dict[str, Any], error: BaseException | None, seconds: float) -> None:
        self.events.append(("failed", f"{message['Body']}: {error}"))

    def on_deleted(self, message: dict[str, Any]) -> None:
        self.events.append(("deleted", message["Body"]))


def test_hooks_see_each_event_and_a_hook_that_raises_costs_only_a_log_line(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    hooks = Recorder()
    attempts: list[int] = []

    def handler(message: dict[str, Any]) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("first attempt")

    worker = start_worker(worker_sqs, url, handler, hooks=hooks, failure_policy=MakeVisibleNow(), max_concurrency=1)
    worker_sqs.send_message(QueueUrl=url, MessageBody="x")
    wait_for(lambda: worker.counters.deleted == 1, "the delete")
    assert hooks.events == [("received", "x"), ("failed", "x: first attempt"), ("received", "x"),
                            ("succeeded", "x"), ("deleted", "x")]
    counters = worker.counters
    assert (counters.received, counters.failed, counters.succeeded, counters.deleted) == (2, 1, 1, 1)
    assert visible_and_in_flight(worker_sqs, url) == (0, 0)
