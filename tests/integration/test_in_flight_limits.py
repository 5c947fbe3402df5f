"""In-flight limits: a standard queue with its quota of messages in
flight answers a short poll with OverLimit (403) and a long poll with no new messages until
the count drops; a FIFO queue at its quota stops delivering without an error.

SQS's quotas are 120,000 for both; they are server settings, so these tests run their
own server with --in-flight-limit 5 and --fifo-in-flight-limit 4, on the manual clock.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from support.fifo import LongPoll, delete_all, got, make_fifo, rcv, send, send_batch
from support.server import ClockControl
from support.sqs import Counts, counts, raises_modeled

pytestmark = pytest.mark.server_process

LIMIT = 5
FIFO_LIMIT = 4
HELD = 43200  # visibility of the messages that fill the limit: they stay in flight whatever the clock does


@pytest.fixture
def in_flight_limited(server_factory: Any, tmp_path: Any) -> Any:
    return server_factory(tmp_path / "limits.db", "--test-clock", "--in-flight-limit", str(LIMIT),
                          "--fifo-in-flight-limit", str(FIFO_LIMIT))


@pytest.fixture
def client(in_flight_limited: Any, make_client: Any) -> Any:
    return make_client(in_flight_limited.endpoint)


@pytest.fixture
def limited_clock(in_flight_limited: Any) -> ClockControl:
    return ClockControl(in_flight_limited.endpoint)


def standard_queue(client: Any, **attributes: str) -> str:
    return client.create_queue(QueueName=f"limits-{uuid.uuid4().hex[:12]}", Attributes=attributes)["QueueUrl"]


def fifo_queue(client: Any) -> str:
    return make_fifo(lambda attributes, name: client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def fill(client: Any, url: str, messages: int, in_flight: int) -> list[dict[str, Any]]:
    """Send `messages` plain messages and put `in_flight` of them in flight."""
    send_batch_plain(client, url, messages)
    held = []
    while len(held) < in_flight:
        held += rcv(client, url, min(10, in_flight - len(held)), VisibilityTimeout=HELD)
    assert len(held) == in_flight
    return held


def send_batch_plain(client: Any, url: str, n: int) -> None:
    for start in range(0, n, 10):
        client.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"m{i}", "MessageBody": f"m{i}"} for i in range(start, min(n, start + 10))])


def run_out_the_wait(clock: ClockControl, poll: LongPoll) -> list[dict[str, Any]]:
    """Move the manual clock past the poll's WaitTimeSeconds until it answers."""
    for _ in range(100):
        if not poll.running:
            break
        clock.advance(21)
        poll.wait(0.1)
    return poll.join()


# --- standard queues ------------------------------------------------------------------------


def test_a_standard_queue_at_its_in_flight_limit_answers_a_short_poll_with_over_limit(client):
    url = standard_queue(client)
    fill(client, url, 8, LIMIT)
    with raises_modeled(client, "OverLimit"):
        client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    assert counts(client, url) == Counts(3, LIMIT, 0), "the refused receive took nothing"


def test_below_the_limit_a_standard_queue_delivers_as_usual(client):
    url = standard_queue(client)
    fill(client, url, 8, LIMIT - 1)
    assert len(rcv(client, url, 1)) == 1


def test_deleting_an_in_flight_message_ends_over_limit(client):
    url = standard_queue(client)
    held = fill(client, url, 8, LIMIT)
    delete_all(client, url, held[:1])
    assert len(rcv(client, url, 1)) == 1


def test_an_ended_visibility_timeout_ends_over_limit(client, limited_clock):
    url = standard_queue(client)
    send_batch_plain(client, url, 8)
    for _ in range(LIMIT):
        assert len(rcv(client, url, 1, VisibilityTimeout=60)) == 1
    with raises_modeled(client, "OverLimit"):
        rcv(client, url)
    limited_clock.advance(61)
    assert len(rcv(client, url, 10)) == 8


def test_sends_and_other_actions_still_work_at_the_in_flight_limit(client):
    url = standard_queue(client)
    held = fill(client, url, 5, LIMIT)
    client.send_message(QueueUrl=url, MessageBody="more")
    client.change_message_visibility(QueueUrl=url, ReceiptHandle=held[0]["ReceiptHandle"], VisibilityTimeout=600)
    assert counts(client, url) == Counts(1, LIMIT, 0)


def test_the_in_flight_limit_is_per_queue(client):
    full = standard_queue(client)
    fill(client, full, 6, LIMIT)
    other = standard_queue(client)
    client.send_message(QueueUrl=other, MessageBody="x")
    assert len(rcv(client, other)) == 1
    with raises_modeled(client, "OverLimit"):
        rcv(client, full)


def test_a_long_poll_at_the_in_flight_limit_returns_no_messages_and_no_error(client, make_client, in_flight_limited,
                                                                             limited_clock):
    url = standard_queue(client)
    fill(client, url, 8, LIMIT)
    poll = LongPoll(make_client(in_flight_limited.endpoint), url)
    assert run_out_the_wait(limited_clock, poll) == []
    assert counts(client, url) == Counts(3, LIMIT, 0)


def test_a_waiting_long_poll_gets_a_message_once_the_count_drops_below_the_limit(
        client, make_client, in_flight_limited, limited_clock):
    url = standard_queue(client)
    held = fill(client, url, 8, LIMIT)
    pending = limited_clock.timers()
    poll = LongPoll(make_client(in_flight_limited.endpoint), url)
    limited_clock.wait_for_timers(pending + 1)  # it waits: only the wake-up of the delete can feed it
    delete_all(client, url, held[:1])
    # Below the limit (4 in flight), a receive takes what it asks for: all 3 visible, 2 past the limit of 5.
    # The limit stops receives at it; it does not trim one that starts below it.
    assert len(poll.join()) == 3
    assert counts(client, url) == Counts(0, LIMIT + 2, 0)


def test_a_fair_queue_has_the_same_in_flight_limit(client):
    url = standard_queue(client)
    for start in range(0, 20, 10):
        send_batch(client, url, [("tenant", i) for i in range(start, start + 10)], fifo=False)
    while counts(client, url).in_flight < LIMIT:
        rcv(client, url, 1, VisibilityTimeout=HELD)
    with raises_modeled(client, "OverLimit"):
        rcv(client, url)


# --- FIFO queues ----------------------------------------------------------------------------


def test_a_fifo_queue_delivers_no_more_than_its_in_flight_limit_and_raises_no_error(client):
    url = fifo_queue(client)
    for n in range(10):
        send(client, url, f"g{n}", 0)
    received = rcv(client, url, 10, VisibilityTimeout=HELD)
    assert len(received) == FIFO_LIMIT
    assert rcv(client, url, 10) == [], "a short poll at the limit is empty, not an error"
    assert counts(client, url) == Counts(10 - FIFO_LIMIT, FIFO_LIMIT, 0)


def test_the_fifo_limit_counts_messages_not_groups(client):
    url = fifo_queue(client)
    for i in range(10):
        send(client, url, "one-group", i)
    assert got(rcv(client, url, 10, VisibilityTimeout=HELD)) == [f"one-group:{i}" for i in range(FIFO_LIMIT)]


def test_a_fifo_queue_delivers_again_as_its_in_flight_count_drops(client, limited_clock):
    url = fifo_queue(client)
    for n in range(10):
        send(client, url, f"g{n}", 0)
    first = rcv(client, url, 10, VisibilityTimeout=60)
    delete_all(client, url, first[:1])
    assert len(rcv(client, url, 10, VisibilityTimeout=60)) == 1
    assert rcv(client, url, 10) == []
    limited_clock.advance(61)
    assert len(rcv(client, url, 10)) == FIFO_LIMIT


def test_a_fifo_long_poll_at_the_limit_returns_no_messages_and_no_error(
        client, make_client, in_flight_limited, limited_clock):
    url = fifo_queue(client)
    for n in range(6):
        send(client, url, f"g{n}", 0)
    assert len(rcv(client, url, 10, VisibilityTimeout=HELD)) == FIFO_LIMIT
    assert run_out_the_wait(limited_clock, LongPoll(make_client(in_flight_limited.endpoint), url)) == []


def test_a_waiting_fifo_long_poll_gets_a_message_once_one_is_deleted(
        client, make_client, in_flight_limited, limited_clock):
    url = fifo_queue(client)
    for n in range(6):
        send(client, url, f"g{n}", 0)
    held = rcv(client, url, 10, VisibilityTimeout=HELD)
    pending = limited_clock.timers()
    poll = LongPoll(make_client(in_flight_limited.endpoint), url)
    limited_clock.wait_for_timers(pending + 1)  # it waits: only the wake-up of the delete can feed it
    delete_all(client, url, held[:1])
    assert len(poll.join()) == 1
