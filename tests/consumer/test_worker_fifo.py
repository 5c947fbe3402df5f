"""FIFO queues: a group's messages run one after another, in order, also when one of them fails."""

from __future__ import annotations

import threading
from typing import Any

from support.workers import WAIT_TIMEOUT_S, receive_now, wait_for

from queueserver.consumer import MakeVisibleNow


class GroupRecorder:
    """Records the order bodies were handled in, fails chosen bodies once, and catches overlap in a group."""

    def __init__(self, fail_once: set[str] = frozenset(), meet: int = 0) -> None:  # type: ignore[assignment]
        self.log: list[str] = []
        self.fail_once = set(fail_once)
        self.overlaps: list[str] = []
        self._running: set[str] = set()
        self._lock = threading.Lock()
        self._meeting = threading.Barrier(meet, timeout=WAIT_TIMEOUT_S) if meet else None
        self.met = threading.Event()

    def __call__(self, message: dict[str, Any]) -> None:
        body, group = message["Body"], message["Attributes"]["MessageGroupId"]
        with self._lock:
            if group in self._running:
                self.overlaps.append(body)
            self._running.add(group)
            self.log.append(body)
            fail = body in self.fail_once
            self.fail_once.discard(body)
        try:
            if self._meeting is not None and not self.met.is_set():
                self._meeting.wait()  # the first message of each group: they must run at the same time
                self.met.set()
            if fail:
                raise RuntimeError(f"{body} fails once")
        finally:
            with self._lock:
                self._running.discard(group)

    def of_group(self, prefix: str) -> list[str]:
        return [body for body in self.log if body.startswith(prefix)]


def send_groups(worker_sqs: Any, url: str, groups: dict[str, list[str]]) -> None:
    for group, bodies in groups.items():
        for body in bodies:
            worker_sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)


def test_the_messages_of_one_group_are_handled_one_after_another_in_order_while_groups_run_side_by_side(
        worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue(fifo=True)
    send_groups(worker_sqs, url, {"A": ["a1", "a2", "a3", "a4"], "B": ["b1", "b2", "b3", "b4"]})
    handler = GroupRecorder(meet=2)
    worker = start_worker(worker_sqs, url, handler, max_concurrency=2)
    wait_for(lambda: worker.counters.deleted == 8, "eight deletes")
    assert worker.settings.is_fifo, "detected from the .fifo suffix"
    assert handler.met.is_set(), "the two groups ran at the same time"
    assert handler.of_group("a") == ["a1", "a2", "a3", "a4"]
    assert handler.of_group("b") == ["b1", "b2", "b3", "b4"]
    assert handler.overlaps == []


def test_when_a_message_fails_the_rest_of_its_group_is_not_run_and_is_redelivered_in_order(
        worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue(fifo=True)
    send_groups(worker_sqs, url, {"A": ["a1", "a2", "a3", "a4", "a5"], "B": ["b1", "b2", "b3"]})
    handler = GroupRecorder(fail_once={"a3"})
    worker = start_worker(worker_sqs, url, handler, max_concurrency=2, failure_policy=MakeVisibleNow())
    wait_for(lambda: worker.counters.deleted == 8, "eight deletes")
    assert handler.of_group("a") == ["a1", "a2", "a3", "a3", "a4", "a5"]
    assert handler.of_group("b") == ["b1", "b2", "b3"]
    assert handler.overlaps == []
    assert worker.counters.failed == 1


def test_a_failed_message_left_to_expire_holds_its_released_group_back_until_it_returns(
        worker_sqs, make_worker_queue, server_clock, start_worker):
    url = make_worker_queue(fifo=True)
    send_groups(worker_sqs, url, {"G": ["m1", "m2", "m3"]})
    handler = GroupRecorder(fail_once={"m1"})
    worker = start_worker(worker_sqs, url, handler, max_concurrency=1, max_messages=10)
    wait_for(lambda: worker.counters.failed == 1 and worker.counters.released == 2,
             "the failure and the release of the rest of the group")
    assert handler.log == ["m1"]
    assert receive_now(worker_sqs, url) == [], "m1 is in flight, so its group waits"
    server_clock.advance(31)
    wait_for(lambda: worker.counters.deleted == 3, "three deletes")
    assert handler.log == ["m1", "m1", "m2", "m3"]


def test_a_shutdown_releases_the_rest_of_a_fifo_group_in_order(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue(fifo=True)
    send_groups(worker_sqs, url, {"G": ["m1", "m2", "m3"]})
    started, finish = threading.Event(), threading.Event()

    def handler(message: dict[str, Any]) -> None:
        started.set()
        assert finish.wait(WAIT_TIMEOUT_S)

    worker = start_worker(worker_sqs, url, handler, max_concurrency=1)
    try:
        wait_for(started.is_set, "m1's handler to start")
        wait_for(lambda: worker.counters.received == 3, "the whole group to be received")
        worker.stop()
        wait_for(lambda: worker.counters.released == 2, "m2 and m3 to be released")
    finally:
        finish.set()
    assert worker.join(timeout=WAIT_TIMEOUT_S)
    assert worker.counters.deleted == 1
    assert [m["Body"] for m in receive_now(worker_sqs, url)] == ["m2", "m3"]
