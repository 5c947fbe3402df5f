"""Fair queues: MessageGroupId on a standard queue names a tenant,
and receives are fair across tenants, so one tenant's backlog does not delay another's
few messages. A fair queue is still a standard queue: no group is held while one of its
messages is in flight, and there is no deduplication or SequenceNumber.
"""

from __future__ import annotations

from support.fifo import ALL, delete_all, got, parse_body, rcv, send_batch
from support.sqs import Counts, counts, raises_code

NOISY_BACKLOG = 2000
QUIET = 5
FEW_RECEIVES = 2  # the quiet tenant's messages must all come within this many receives of 10


def send_backlog(sqs, url, group, n):
    for start in range(0, n, 10):
        send_batch(sqs, url, [(group, i) for i in range(start, min(start + 10, n))], fifo=False)


def receives_until_all_of(sqs, url, group, wanted, delete=True, max_receives=400):
    """Receive 10 at a time until every message of `group` came; returns how many receives it took."""
    seen = set()
    for n in range(1, max_receives + 1):
        batch = rcv(sqs, url, 10)
        assert batch, f"the queue ran dry with {sorted(seen)} of {group} received"
        seen.update(m["Body"] for m in batch if m["Attributes"].get("MessageGroupId") == group)
        if delete:
            delete_all(sqs, url, batch)
        if len(seen) == wanted:
            return n
    raise AssertionError(f"{group} still incomplete after {max_receives} receives")


def test_a_standard_queue_accepts_a_message_group_id_and_returns_it(sqs, queue_url):
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="hello", MessageGroupId="tenant-1")
    assert "SequenceNumber" not in sent
    [message] = rcv(sqs, queue_url)
    assert message["Attributes"]["MessageGroupId"] == "tenant-1"
    assert "SequenceNumber" not in message["Attributes"]
    assert "MessageDeduplicationId" not in message["Attributes"]


def test_a_message_group_id_on_a_standard_queue_is_selectable_by_name(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageGroupId="t")
    [message] = sqs.receive_message(QueueUrl=queue_url, MessageSystemAttributeNames=["MessageGroupId"])["Messages"]
    assert message["Attributes"] == {"MessageGroupId": "t"}


def test_a_message_group_id_on_a_standard_queue_is_validated_like_on_fifo(sqs, queue_url):
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageGroupId="a" * 129)
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageGroupId="has space")


def test_a_standard_batch_accepts_message_group_ids(sqs, queue_url):
    send_batch(sqs, queue_url, [("a", 0), ("b", 0)], fifo=False)
    received = rcv(sqs, queue_url)
    assert sorted(m["Attributes"]["MessageGroupId"] for m in received) == ["a", "b"]


def test_a_fair_queue_does_not_deduplicate(sqs, queue_url):
    for _ in range(2):
        sqs.send_message(QueueUrl=queue_url, MessageBody="same", MessageGroupId="t")
    assert counts(sqs, queue_url) == Counts(2, 0, 0)


def test_a_quiet_group_is_not_delayed_by_a_noisy_groups_backlog_while_consumers_drain(sqs, queue_url):
    send_backlog(sqs, queue_url, "noisy", NOISY_BACKLOG)
    send_batch(sqs, queue_url, [("quiet", i) for i in range(QUIET)], fifo=False)
    assert receives_until_all_of(sqs, queue_url, "quiet", QUIET) <= FEW_RECEIVES
    assert counts(sqs, queue_url).visible >= NOISY_BACKLOG - 10 * FEW_RECEIVES


def test_a_quiet_group_is_not_delayed_while_the_noisy_groups_messages_stay_in_flight(sqs, queue_url):
    send_backlog(sqs, queue_url, "noisy", 300)
    for _ in range(5):  # slow consumers: 50 noisy messages in flight
        assert len(rcv(sqs, queue_url, 10, VisibilityTimeout=600)) == 10
    send_batch(sqs, queue_url, [("quiet", i) for i in range(QUIET)], fifo=False)
    assert receives_until_all_of(sqs, queue_url, "quiet", QUIET, delete=False) <= FEW_RECEIVES


def test_a_receive_serves_every_group_with_messages_waiting(sqs, queue_url):
    for group in ("a", "b", "c", "d"):
        send_backlog(sqs, queue_url, group, 20)  # a's 20, then b's 20, …
    first = rcv(sqs, queue_url, 10)
    assert {m["Attributes"]["MessageGroupId"] for m in first} == {"a", "b", "c", "d"}


def test_a_group_with_many_messages_in_flight_yields_to_groups_with_none(sqs, queue_url):
    send_backlog(sqs, queue_url, "busy", 60)
    for _ in range(3):
        rcv(sqs, queue_url, 10, VisibilityTimeout=600)  # 30 of busy in flight
    send_batch(sqs, queue_url, [("idle", i) for i in range(3)], fifo=False)
    received = rcv(sqs, queue_url, 10)
    assert sorted(m["Body"] for m in received if m["Attributes"]["MessageGroupId"] == "idle") == \
        ["idle:0", "idle:1", "idle:2"]


def test_messages_without_a_group_are_each_a_tenant_of_their_own(sqs, queue_url):
    send_backlog(sqs, queue_url, "noisy", 100)
    for i in range(4):
        sqs.send_message(QueueUrl=queue_url, MessageBody=f"loner:{i}")
    received = rcv(sqs, queue_url, 10)
    assert sorted(m["Body"] for m in received if "MessageGroupId" not in m["Attributes"]) == \
        [f"loner:{i}" for i in range(4)]


def test_a_fair_queue_does_not_hold_a_group_while_one_of_its_messages_is_in_flight(sqs, queue_url):
    send_batch(sqs, queue_url, [("g", i) for i in range(3)], fifo=False)
    assert len(rcv(sqs, queue_url, 1)) == 1
    assert len(rcv(sqs, queue_url, 10)) == 2
    assert counts(sqs, queue_url) == Counts(0, 3, 0)


def test_a_drained_fair_queue_delivered_every_message_once(sqs, queue_url):
    send_backlog(sqs, queue_url, "noisy", 200)
    send_batch(sqs, queue_url, [("quiet", i) for i in range(7)], fifo=False)
    for i in range(6):
        sqs.send_message(QueueUrl=queue_url, MessageBody=f"loner:{i}")
    bodies = []
    while True:
        batch = rcv(sqs, queue_url, 10)
        if not batch:
            break
        bodies += got(batch)
        delete_all(sqs, queue_url, batch)
    assert len(bodies) == len(set(bodies)) == 200 + 7 + 6
    noisy = [parse_body(b)[1] for b in bodies if b.startswith("noisy:")]
    assert noisy == sorted(noisy), "one tenant's messages still come oldest first"
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_a_message_group_id_does_not_make_a_standard_queue_fifo(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageGroupId="t")
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=ALL)["Attributes"]
    assert "FifoQueue" not in attributes
