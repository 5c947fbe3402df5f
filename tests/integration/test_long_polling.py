"""Long polling: ReceiveMessage with WaitTimeSeconds returns as soon as a message is available.

A poller runs in a thread; the test waits until the server holds it (its wake-up is pending on
the manual clock), then makes a message available (send, ChangeMessageVisibility 0, or moving
the manual clock). Only a poll that was already waiting proves a wake-up: one that arrived late
would find the message by its first claim.

No wall-clock timing is asserted. A poll also ends when its WaitTimeSeconds of real time run
out, and then claims once more, so "it returned the message" alone would not tell a wake-up
from the end of its wait. A `Witness` tells them apart: a long poll of the same WaitTimeSeconds,
on a queue of its own, that began waiting first. Its real-time end comes before the poll under
test's, so if the witness is still waiting once that poll has returned, the poll did not wait
out its time: it was woken (or answered at once). The witness proves it is still waiting by
taking a message sent to it afterwards.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.metrics import scrape
from support.net import address, connect, server_end_open
from support.server import ClockControl, wait_for
from support.sqs import Counts, counts, receive, receive_all

WAIT = 20  # every poll's WaitTimeSeconds (the most SQS allows); on the test clock, moves stay below it
JOIN = 30.0  # hard bound so a broken server cannot hang the suite


class Poller:
    """One ReceiveMessage call running in its own thread with its own client."""

    def __init__(self, client: Any, queue_url: str, **kwargs: Any):
        self.result: list[dict[str, Any]] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(client, queue_url, kwargs),
                                        daemon=True)

    def _run(self, client: Any, queue_url: str, kwargs: dict[str, Any]) -> None:
        try:
            self.result = client.receive_message(QueueUrl=queue_url, **kwargs).get("Messages", [])
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            self.error = e

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


class Witness:
    """A long poll of WAIT seconds on a queue of its own, begun before the poll under test (see above)."""

    def __init__(self, sqs: Any, client: Any, queue_url: str, clock: ClockControl):
        self._sqs = sqs
        self._url = queue_url
        self._poller = Poller(client, queue_url, WaitTimeSeconds=WAIT).start(clock)

    def assert_still_waiting(self) -> None:
        """The witness takes a message sent now: it had not reached the end of its wait."""
        self._sqs.send_message(QueueUrl=self._url, MessageBody="still waiting")
        assert [m["Body"] for m in self._poller.wait()] == ["still waiting"], (
            "the witness's wait ran out first: the poll under test waited out its WaitTimeSeconds")

    def release(self) -> None:
        """End the witness's poll if the test did not (it failed first), so it leaves no wake-up behind."""
        if self._poller.waiting:
            self._sqs.send_message(QueueUrl=self._url, MessageBody="released")
            self._poller.wait()


@pytest.fixture
def poll_client(server, make_client):
    return make_client(server.endpoint)


@pytest.fixture
def witness(sqs, server, make_client, make_queue, clock) -> Iterator[Witness]:
    started = Witness(sqs, make_client(server.endpoint), make_queue(), clock)
    yield started
    started.release()


def test_a_long_poll_is_woken_by_a_send_from_another_thread(sqs, poll_client, queue_url, clock, witness):
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=WAIT).start(clock)
    assert poller.waiting, "an empty queue must make the long poll wait"
    sqs.send_message(QueueUrl=queue_url, MessageBody="wake up")
    assert [m["Body"] for m in poller.wait()] == ["wake up"]
    witness.assert_still_waiting()


def test_a_long_poll_returns_at_once_when_a_message_is_already_there(sqs, queue_url, witness):
    sqs.send_message(QueueUrl=queue_url, MessageBody="ready")
    assert [m["Body"] for m in receive(sqs, queue_url, WaitTimeSeconds=WAIT)] == ["ready"]
    witness.assert_still_waiting()


def test_a_long_poll_is_woken_by_change_message_visibility_zero(sqs, poll_client, queue_url, clock, witness):
    sqs.send_message(QueueUrl=queue_url, MessageBody="released")
    (held,) = receive(sqs, queue_url, VisibilityTimeout=600)
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=WAIT).start(clock)
    assert poller.waiting
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=held["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert [m["MessageId"] for m in poller.wait()] == [held["MessageId"]]
    witness.assert_still_waiting()


def test_a_long_poll_is_woken_when_the_clock_reaches_the_end_of_a_delay(
        sqs, poll_client, queue_url, clock, witness):
    sqs.send_message(QueueUrl=queue_url, MessageBody="delayed", DelaySeconds=10)
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=WAIT).start(clock)
    pending = clock.timers()
    clock.advance(9.999)
    assert clock.timers() == pending and poller.waiting, "the delay has not ended: the poll still waits"
    clock.advance(0.001)  # fires, within this call, every wake-up due by then
    assert clock.timers() == pending - 1, "the delay ended: the poll's wake-up fired"
    assert [m["Body"] for m in poller.wait()] == ["delayed"]
    witness.assert_still_waiting()  # 10 s of its 20 on the test clock: its wait is not over either


def test_a_long_poll_is_woken_when_the_clock_reaches_the_end_of_a_visibility_timeout(
        sqs, poll_client, queue_url, clock, witness):
    sqs.send_message(QueueUrl=queue_url, MessageBody="comes back")
    (held,) = receive(sqs, queue_url, VisibilityTimeout=10)
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=WAIT).start(clock)
    pending = clock.timers()
    clock.advance(9.999)
    assert clock.timers() == pending and poller.waiting, "the message is still in flight: the poll still waits"
    clock.advance(0.001)
    assert clock.timers() == pending - 1, "the visibility timeout ended: the poll's wake-up fired"
    assert [m["MessageId"] for m in poller.wait()] == [held["MessageId"]]
    witness.assert_still_waiting()


def test_a_long_poll_returns_nothing_when_the_clock_reaches_its_wait_time_and_not_a_millisecond_before(
        poll_client, queue_url, clock):
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=WAIT).start(clock)
    pending = clock.timers()
    clock.advance(WAIT - 0.001)
    assert clock.timers() == pending and poller.waiting, "a millisecond of its wait is left: it still waits"
    clock.advance(0.001)
    assert clock.timers() == pending - 1, "its wait time is over on the test clock: the wake-up fired"
    assert poller.wait() == []


def test_a_long_poll_ends_after_its_wait_time_in_real_time_while_the_test_clock_stands_still(
        poll_client, queue_url, clock):
    """So that a test that forgets the clock does not hang. A real wait is the point here: 3 s."""
    stood = clock.now_ms()
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=3).start(clock)  # seen waiting on the server
    assert poller.wait() == []
    assert clock.now_ms() == stood, "nobody moved the test clock: real time ended the poll"


def test_a_send_to_another_queue_does_not_end_the_poll(sqs, poll_client, make_queue, clock):
    watched, other = make_queue(), make_queue()
    poller = Poller(poll_client, watched, WaitTimeSeconds=WAIT).start(clock)
    sqs.send_message(QueueUrl=other, MessageBody="not for you")  # committed before it is answered
    assert poller.waiting
    clock.advance(WAIT)
    assert poller.wait() == []


def test_the_queue_receive_wait_time_makes_plain_receives_long_polls(
        sqs, poll_client, make_queue, clock, witness):
    url = make_queue({"ReceiveMessageWaitTimeSeconds": str(WAIT)})
    poller = Poller(poll_client, url).start(clock)  # no WaitTimeSeconds: the queue's apply
    assert poller.waiting
    sqs.send_message(QueueUrl=url, MessageBody="via queue default")
    assert [m["Body"] for m in poller.wait()] == ["via queue default"]
    witness.assert_still_waiting()


def test_wait_time_zero_on_the_call_overrides_the_queue_receive_wait_time(sqs, make_queue, clock, witness):
    url = make_queue({"ReceiveMessageWaitTimeSeconds": str(WAIT)})
    pending = clock.timers()
    assert receive(sqs, url, WaitTimeSeconds=0) == []
    assert clock.timers() == pending, "a short poll leaves no wake-up behind"
    witness.assert_still_waiting()


def test_one_message_wakes_exactly_one_of_two_long_polls(
        sqs, server, make_client, queue_url, clock):
    first = Poller(make_client(server.endpoint), queue_url, WaitTimeSeconds=WAIT)
    second = Poller(make_client(server.endpoint), queue_url, WaitTimeSeconds=WAIT)
    pending = clock.timers()
    first._thread.start()
    second._thread.start()
    clock.wait_for_timers(pending + 2)
    sqs.send_message(QueueUrl=queue_url, MessageBody="only one")
    wait_for(lambda: not (first.waiting and second.waiting), "one of the long polls to return", timeout=JOIN)
    # Exactly one poller returned with the message; the other keeps waiting.
    assert [first.waiting, second.waiting].count(True) == 1
    clock.advance(WAIT)
    results = [first.wait(), second.wait()]
    assert sorted(len(r) for r in results) == [0, 1]
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def test_a_long_poll_returns_several_messages_sent_in_one_batch(sqs, poll_client, queue_url, clock):
    poller = Poller(poll_client, queue_url, WaitTimeSeconds=WAIT, MaxNumberOfMessages=10).start(clock)
    sqs.send_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": f"b{i}", "MessageBody": f"b{i}"} for i in range(5)])
    msgs = poller.wait()
    # the batch is one commit: the poll wakes after it, with all five visible
    assert [m["Body"] for m in msgs] == [f"b{i}" for i in range(5)]
    assert len({m["MessageId"] for m in msgs}) == 5


def _hung_up_long_polls(endpoint: str, queue_url: str, clock: ClockControl, count: int) -> list[socket.socket]:
    """COUNT long polls sent over raw sockets, each held waiting by the server; the sockets, to close."""
    body = json.dumps({"QueueUrl": queue_url, "WaitTimeSeconds": 20, "MaxNumberOfMessages": 10}).encode()
    request = (b"POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.0\r\n"
               b"X-Amz-Target: AmazonSQS.ReceiveMessage\r\nContent-Length: %d\r\n\r\n%s"
               % ("{}:{}".format(*address(endpoint)).encode(), len(body), body))
    pending = clock.timers()
    polls = []
    for _ in range(count):
        sock = connect(endpoint)
        sock.sendall(request)
        polls.append(sock)
    clock.wait_for_timers(pending + count)
    return polls


def _receivable_at_once(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    return receive_all(sqs, queue_url, VisibilityTimeout=600, AttributeNames=["ApproximateReceiveCount"])


def _receives_answered(endpoint: str) -> float:
    """ReceiveMessage requests the server has finished, by /metrics."""
    return sum(value for labels, value in scrape(endpoint).labelled("queueserver_requests_total").items()
               if ("action", "ReceiveMessage") in labels)


def test_long_polls_whose_clients_hung_up_take_none_of_the_messages_sent_after(sqs, queue_url, clock):
    pending = clock.timers()
    polls = _hung_up_long_polls(sqs.meta.endpoint_url, queue_url, clock, 100)
    for sock in polls:
        sock.close()
    for batch in range(50):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "MessageBody": f"later {batch}.{i}"} for i in range(10)])
    received = _receivable_at_once(sqs, queue_url)
    assert sorted(m["Body"] for m in received) == sorted(f"later {b}.{i}" for b in range(50) for i in range(10))
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in received} == {"1"}
    assert clock.timers() == pending, "long polls of clients that hung up are still waiting"


def test_a_claim_that_races_its_clients_hang_up_is_given_back_at_once_uncounted(
        server_factory, make_client, tmp_path):
    """The poll wakes (its messages' delay ends) and claims while another process holds the database,
    so the claim is still running when its client hangs up: the messages come back visible at once."""
    db = tmp_path / "race.db"
    server = server_factory(db, "--test-clock")
    sqs, clock = make_client(server.endpoint), ClockControl(server.endpoint)
    queue_url = sqs.create_queue(QueueName="raced")["QueueUrl"]
    sqs.send_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": str(i), "MessageBody": f"delayed {i}", "DelaySeconds": 60} for i in range(10)])
    pending = clock.timers()
    (poll,) = _hung_up_long_polls(server.endpoint, queue_url, clock, 1)
    client_port = poll.getsockname()[1]
    intruder = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        intruder.execute("BEGIN EXCLUSIVE")
        clock.advance(61)  # the delay ends: the poll wakes and claims, and its claim waits for the lock
        wait_for(lambda: clock.timers() < pending + 1, "the poll to wake and claim")
        assert server_end_open(server.endpoint, client_port)
        poll.close()
        wait_for(lambda: not server_end_open(server.endpoint, client_port), "the server to see the hang-up")
        answered = _receives_answered(server.endpoint)
    finally:
        intruder.execute("ROLLBACK")
        intruder.close()
    # the claim completes now; the poll gives it back and ends (the manual clock ends no visibility timeout)
    wait_for(lambda: _receives_answered(server.endpoint) > answered, "the hung-up poll to end")
    received = _receivable_at_once(sqs, queue_url)
    assert sorted(m["Body"] for m in received) == [f"delayed {i}" for i in range(10)]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in received} == {"1"}
    server.stop()
