"""Long polling: ReceiveMessage with WaitTimeSeconds returns as soon as a message is available.

These are the only tests that wait in real time, and only briefly: a poller runs in a
thread, the test waits until the server holds it (its wake-up is pending on the manual
clock), makes a message available (send, ChangeMessageVisibility 0, or moving the manual
clock), and the poll must come back within PROMPT seconds. Only a poll that was already
waiting proves a wake-up: one that arrived late would find the message by its first claim.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from support.server import ClockControl
from support.sqs import Counts, counts, receive

PROMPT = 0.5  # seconds a woken long poll may take to return
JOIN = 10.0  # hard bound so a broken server cannot hang the suite


class Poller:
    """One ReceiveMessage call running in its own thread with its own client."""

    def __init__(self, client: Any, queue_url: str, **kwargs: Any):
        self.result: list[dict[str, Any]] | None = None
        self.error: BaseException | None = None
        self.returned_at: float | None = None
        self._thread = threading.Thread(target=self._run, args=(client, queue_url, kwargs),
                                        daemon=True)

    def _run(self, client: Any, queue_url: str, kwargs: dict[str, Any]) -> None:
        try:
            self.result = client.receive_message(QueueUrl=queue_url, **kwargs).get("Messages", [])
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            self.error = e
        finally:
            self.returned_at = time.monotonic()

    def start(self, clock: ClockControl) -> Poller:
        """Start the poll and return once the server holds it waiting."""
        pending = clock.timers()
        self._thread.start()
        clock.wait_for_timers(pending + 1)
        return self

    @property
    def waiting(self) -> bool:
        return self._thread.is_alive()

    def wait(self) -> list[dict[str, Any]]:
        self._thread.join(JOIN)
        assert not self._thread.is_alive(), f"the long poll did not return within {JOIN}s"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def latency_since(self, t: float) -> float:
        assert self.returned_at is not None
        return self.returned_at - t


@pytest.fixture
def poll_client(server, make_client):
    return make_client(server.endpoint)


def test_a_long_poll_returns_promptly_after_a_send_from_another_thread(
        sqs, poll_client, queue_url, clock):
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=10).start(clock)
    assert poller.waiting, "an empty queue must make the long poll wait"
    sqs.send_message(QueueUrl=queue_url, MessageBody="wake up")
    sent_at = time.monotonic()
    msgs = poller.wait()
    assert [m["Body"] for m in msgs] == ["wake up"]
    assert poller.latency_since(sent_at) < PROMPT


def test_a_long_poll_returns_at_once_when_a_message_is_already_there(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="ready")
    t0 = time.monotonic()
    msgs = receive(sqs, queue_url, WaitTimeSeconds=20)
    assert time.monotonic() - t0 < PROMPT
    assert [m["Body"] for m in msgs] == ["ready"]


def test_a_long_poll_returns_promptly_after_change_message_visibility_zero(
        sqs, poll_client, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="released")
    (held,) = receive(sqs, queue_url, VisibilityTimeout=600)
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=10).start(clock)
    assert poller.waiting
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=held["ReceiptHandle"],
                                  VisibilityTimeout=0)
    released_at = time.monotonic()
    msgs = poller.wait()
    assert [m["MessageId"] for m in msgs] == [held["MessageId"]]
    assert poller.latency_since(released_at) < PROMPT


def test_a_long_poll_returns_promptly_when_the_clock_passes_a_delay(
        sqs, poll_client, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="delayed", DelaySeconds=60)
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=10).start(clock)
    assert poller.waiting
    clock.advance(61)
    advanced_at = time.monotonic()
    msgs = poller.wait()
    assert [m["Body"] for m in msgs] == ["delayed"]
    assert poller.latency_since(advanced_at) < PROMPT


def test_a_long_poll_returns_promptly_when_the_clock_passes_a_visibility_timeout(
        sqs, poll_client, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="comes back")
    (held,) = receive(sqs, queue_url, VisibilityTimeout=120)
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=10).start(clock)
    assert poller.waiting
    clock.advance(121)
    advanced_at = time.monotonic()
    msgs = poller.wait()
    assert [m["MessageId"] for m in msgs] == [held["MessageId"]]
    assert poller.latency_since(advanced_at) < PROMPT


def test_a_long_poll_returns_nothing_promptly_when_the_clock_passes_its_wait_time(
        poll_client, queue_url, clock):
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=20).start(clock)
    assert poller.waiting
    clock.advance(21)
    advanced_at = time.monotonic()
    assert poller.wait() == []
    assert poller.latency_since(advanced_at) < PROMPT


def test_advancing_the_clock_less_than_the_wait_time_keeps_the_poll_waiting(
        poll_client, queue_url, clock):
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=20).start(clock)
    pending = clock.timers()
    clock.advance(10)  # fires, within this call, every wake-up due by then
    assert clock.timers() == pending, "10 of 20 seconds passed: the poll's wake-up must still be pending"
    assert poller.waiting
    clock.advance(11)
    advanced_at = time.monotonic()
    assert poller.wait() == []
    assert poller.latency_since(advanced_at) < PROMPT


def test_a_long_poll_ends_after_its_wait_time_in_real_time_too(poll_client, queue_url):
    t0 = time.monotonic()
    msgs = receive(poll_client, queue_url, WaitTimeSeconds=1)
    elapsed = time.monotonic() - t0
    assert msgs == []
    assert 0.8 <= elapsed < 1.0 + 2 * PROMPT, elapsed


def test_a_send_to_another_queue_does_not_end_the_poll(sqs, poll_client, make_queue, clock):
    watched, other = make_queue(), make_queue()
    poller = Poller(poll_client, watched, WaitTimeSeconds=20).start(clock)
    sqs.send_message(QueueUrl=other, MessageBody="not for you")  # committed before it is answered
    assert poller.waiting
    clock.advance(21)
    assert poller.wait() == []


def test_the_queue_receive_wait_time_makes_plain_receives_long_polls(
        sqs, poll_client, make_queue, clock):
    url = make_queue({"ReceiveMessageWaitTimeSeconds": "20"})
    poller = Poller(poll_client, url).start(clock)  # no WaitTimeSeconds: the queue's 20 s apply
    assert poller.waiting
    sqs.send_message(QueueUrl=url, MessageBody="via queue default")
    sent_at = time.monotonic()
    assert [m["Body"] for m in poller.wait()] == ["via queue default"]
    assert poller.latency_since(sent_at) < PROMPT


def test_wait_time_zero_on_the_call_overrides_the_queue_receive_wait_time(sqs, make_queue):
    url = make_queue({"ReceiveMessageWaitTimeSeconds": "20"})
    t0 = time.monotonic()
    assert receive(sqs, url, WaitTimeSeconds=0) == []
    assert time.monotonic() - t0 < PROMPT


def test_one_message_wakes_exactly_one_of_two_long_polls(
        sqs, server, make_client, queue_url, clock):
    first = Poller(make_client(server.endpoint), queue_url, WaitTimeSeconds=20)
    second = Poller(make_client(server.endpoint), queue_url, WaitTimeSeconds=20)
    pending = clock.timers()
    first._thread.start()
    second._thread.start()
    clock.wait_for_timers(pending + 2)
    sqs.send_message(QueueUrl=queue_url, MessageBody="only one")
    deadline = time.monotonic() + JOIN
    while first.waiting and second.waiting:
        assert time.monotonic() < deadline, "neither long poll returned"
        time.sleep(0.01)
    # Exactly one poller returned with the message; the other keeps waiting.
    assert [first.waiting, second.waiting].count(True) == 1
    clock.advance(21)
    results = [first.wait(), second.wait()]
    assert sorted(len(r) for r in results) == [0, 1]
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def test_a_long_poll_returns_several_messages_sent_in_one_batch(sqs, poll_client, queue_url, clock):
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=10, MaxNumberOfMessages=10).start(clock)
    sqs.send_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": f"b{i}", "MessageBody": f"b{i}"} for i in range(5)])
    msgs = poller.wait()
    assert 1 <= len(msgs) <= 5
    assert len({m["MessageId"] for m in msgs}) == len(msgs)
