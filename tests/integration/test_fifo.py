"""FIFO queues: creation and the FIFO attributes, the FIFO-specific errors of
SendMessage, SequenceNumber, deduplication (the 5-minute window, queue and message-group
scope, content-based), queue delays, and what survives a restart.

Ordering, ReceiveRequestAttemptId, stale receipt handles and dead-letter queues are in
test_fifo_delivery.py. Every test on the shared server runs on its manual clock: windows
of 5 minutes pass with `clock.advance`, never with sleeps.
"""

from __future__ import annotations

import uuid

import pytest
from support.fifo import PUNCTUATION, delete_all, fifo_name, got, make_fifo, rcv, send, send_batch, sha256_hex
from support.sqs import BAD_ATTRIBUTE_VALUE, Counts, counts, raises_code, raises_modeled
from support.sqs import arn_of, redrive_policy

FIFO_ONLY = {"ContentBasedDeduplication": "true", "DeduplicationScope": "messageGroup",
             "FifoThroughputLimit": "perQueue"}


def all_attributes(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


# --- creating FIFO queues --------------------------------------------------------------


def test_a_fifo_queue_name_must_end_in_dot_fifo(sqs, queue_name):
    with raises_code("InvalidParameterValue"):
        sqs.create_queue(QueueName=queue_name, Attributes={"FifoQueue": "true"})


@pytest.mark.parametrize("attributes", [{}, {"FifoQueue": "false"}], ids=["no-FifoQueue", "FifoQueue-false"])
def test_a_name_ending_in_dot_fifo_needs_fifo_queue_true(sqs, queue_name, attributes):
    with raises_code("InvalidParameterValue"):
        sqs.create_queue(QueueName=queue_name + ".fifo", Attributes=attributes)


def test_a_fifo_queue_name_is_at_most_80_characters_including_the_suffix(sqs):
    stem = uuid.uuid4().hex * 3
    url = sqs.create_queue(QueueName=stem[:75] + ".fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert url.endswith("/" + stem[:75] + ".fifo")
    with raises_code("InvalidParameterValue"):
        sqs.create_queue(QueueName=stem[:76] + ".fifo", Attributes={"FifoQueue": "true"})


def test_a_fifo_queue_reports_its_fifo_attributes_with_their_defaults(sqs, make_queue):
    attributes = all_attributes(sqs, make_fifo(make_queue))
    assert attributes["FifoQueue"] == "true"
    assert attributes["ContentBasedDeduplication"] == "false"
    assert attributes["DeduplicationScope"] == "queue"
    assert attributes["FifoThroughputLimit"] == "perQueue"


def test_a_standard_queue_reports_none_of_the_fifo_attributes(sqs, queue_url):
    attributes = all_attributes(sqs, queue_url)
    assert not {"FifoQueue", *FIFO_ONLY} & set(attributes), attributes


def test_fifo_queue_false_on_a_plain_name_is_an_unknown_attribute_and_creates_nothing(sqs, queue_name):
    with raises_modeled(sqs, "InvalidAttributeName") as info:
        sqs.create_queue(QueueName=queue_name, Attributes={"FifoQueue": "false"})
    assert info.value.response["Error"]["Message"] == "Unknown Attribute FifoQueue."
    assert not sqs.list_queues(QueueNamePrefix=queue_name).get("QueueUrls")


def test_fifo_queue_is_not_a_boolean_when_it_is_neither_true_nor_false(sqs, queue_name):
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.create_queue(QueueName=queue_name, Attributes={"FifoQueue": "yes"})


@pytest.mark.parametrize("value", ["true", "false"])
def test_set_queue_attributes_fifo_queue_on_a_standard_queue_is_an_unknown_attribute(sqs, queue_url, value):
    with raises_modeled(sqs, "InvalidAttributeName"):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"FifoQueue": value})
    assert all_attributes(sqs, queue_url).get("FifoQueue") is None


def test_set_queue_attributes_fifo_queue_true_on_a_fifo_queue_is_accepted_and_false_is_refused(sqs, make_queue):
    url = make_fifo(make_queue)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "false"})
    assert all_attributes(sqs, url)["FifoQueue"] == "true"


@pytest.mark.parametrize("name", sorted(FIFO_ONLY))
def test_a_fifo_only_attribute_is_an_unknown_attribute_on_a_standard_queue(sqs, queue_name, queue_url, name):
    with raises_modeled(sqs, "InvalidAttributeName"):
        sqs.create_queue(QueueName=queue_name, Attributes={name: FIFO_ONLY[name]})
    with raises_modeled(sqs, "InvalidAttributeName"):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={name: FIFO_ONLY[name]})


@pytest.mark.parametrize("name, value", [
    ("ContentBasedDeduplication", "yes"),
    ("DeduplicationScope", "group"),
    ("DeduplicationScope", "MessageGroup"),
    ("FifoThroughputLimit", "perGroup"),
    ("FifoThroughputLimit", ""),
])
def test_a_fifo_attribute_outside_its_values_is_an_invalid_attribute_value(sqs, make_queue, name, value):
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.create_queue(QueueName=fifo_name("bad"), Attributes={"FifoQueue": "true", name: value})
    url = make_fifo(make_queue)
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={name: value})


@pytest.mark.parametrize("attributes", [
    {"FifoThroughputLimit": "perMessageGroupId"},
    {"FifoThroughputLimit": "perMessageGroupId", "DeduplicationScope": "queue"},
], ids=["default-scope", "queue-scope"])
def test_per_message_group_throughput_needs_message_group_deduplication_scope_at_creation(sqs, attributes):
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=fifo_name("throughput"), Attributes={"FifoQueue": "true", **attributes})


def test_high_throughput_mode_is_message_group_scope_with_per_message_group_throughput(sqs, make_queue):
    url = make_fifo(make_queue, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    attributes = all_attributes(sqs, url)
    assert (attributes["DeduplicationScope"], attributes["FifoThroughputLimit"]) == ("messageGroup",
                                                                                     "perMessageGroupId")


def test_set_queue_attributes_keeps_per_message_group_throughput_tied_to_message_group_scope(sqs, make_queue):
    url = make_fifo(make_queue)
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoThroughputLimit": "perMessageGroupId"})
    assert all_attributes(sqs, url)["FifoThroughputLimit"] == "perQueue", "a failed set changes nothing"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoThroughputLimit": "perMessageGroupId",
                                                       "DeduplicationScope": "messageGroup"})
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "queue"})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoThroughputLimit": "perQueue"})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "queue"})
    attributes = all_attributes(sqs, url)
    assert (attributes["DeduplicationScope"], attributes["FifoThroughputLimit"]) == ("queue", "perQueue")


def test_creating_a_fifo_queue_again_with_the_same_attributes_returns_its_url(sqs):
    name = fifo_name("again")
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    assert sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"] == url
    with raises_modeled(sqs, "QueueNameExists"):
        sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"})


def test_a_dead_letter_queue_must_be_of_the_same_type_as_its_source(sqs, make_queue, queue_url):
    fifo_url = make_fifo(make_queue)
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.set_queue_attributes(QueueUrl=fifo_url,
                                 Attributes={"RedrivePolicy": redrive_policy(arn_of(sqs, queue_url), 3)})
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.set_queue_attributes(QueueUrl=queue_url,
                                 Attributes={"RedrivePolicy": redrive_policy(arn_of(sqs, fifo_url), 3)})


# --- sending: the FIFO-specific errors ----------------------------------------------------


def test_a_send_without_a_message_group_id_is_missing_a_parameter(sqs, make_queue):
    url = make_fifo(make_queue)
    with raises_code("MissingParameter"):
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="d")
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_batch_entry_without_a_message_group_id_fails_the_whole_batch(sqs, make_queue):
    url = make_fifo(make_queue)
    with raises_code("InvalidParameterValue") as info:
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "ok", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "d1"},
            {"Id": "nogroup", "MessageBody": "b", "MessageDeduplicationId": "d2"},
        ])
    assert info.value.response["Error"]["Message"] == "The request must contain the parameter MessageGroupId."
    assert counts(sqs, url) == Counts(0, 0, 0), "not even the good entry is sent (observed on AWS)"


@pytest.mark.parametrize("delay", [1, 900])
def test_a_per_message_delay_is_rejected_on_a_fifo_queue(sqs, make_queue, delay):
    url = make_fifo(make_queue)
    with raises_code("InvalidParameterValue"):
        send(sqs, url, "g", 0, DelaySeconds=delay)
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_per_message_delay_in_a_fifo_batch_fails_only_that_entry(sqs, make_queue):
    url = make_fifo(make_queue)
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "delayed", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "d1",
         "DelaySeconds": 5},
        {"Id": "plain", "MessageBody": "b", "MessageGroupId": "g", "MessageDeduplicationId": "d2"},
    ])
    assert [e["Id"] for e in resp["Successful"]] == ["plain"]
    [failed] = resp["Failed"]
    assert (failed["Id"], failed["Code"], failed["SenderFault"]) == ("delayed", "InvalidParameterValue", True)
    assert got(rcv(sqs, url)) == ["b"]


def test_a_send_without_a_deduplication_id_needs_content_based_deduplication(sqs, make_queue):
    url = make_fifo(make_queue)
    with raises_code("InvalidParameterValue") as info:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    assert "ContentBasedDeduplication" in info.value.response["Error"]["Message"]
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_deduplication_id_is_rejected_on_a_standard_queue(sqs, queue_url):
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageDeduplicationId="d")
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


@pytest.mark.parametrize("member", ["MessageGroupId", "MessageDeduplicationId"])
def test_group_and_deduplication_ids_are_1_to_128_printable_ascii_characters(sqs, make_queue, member):
    url = make_fifo(make_queue)
    ids = {"MessageGroupId": "g", "MessageDeduplicationId": uuid.uuid4().hex}
    for good in ((PUNCTUATION + "aZ09") * 4)[:128], "x":
        sqs.send_message(QueueUrl=url, MessageBody="ok", **{**ids, member: good})
        ids["MessageDeduplicationId"] = uuid.uuid4().hex
    for bad in "a" * 129, "with space", "caf\u00e9", "tab\t":
        with raises_code("InvalidParameterValue"):
            sqs.send_message(QueueUrl=url, MessageBody="bad", **{**ids, member: bad})
    assert counts(sqs, url).visible == 2


# --- SequenceNumber -------------------------------------------------------------------------


def test_sequence_numbers_are_20_digit_strings_increasing_per_queue_across_groups_and_batches(sqs, make_queue):
    url = make_fifo(make_queue)
    sent = [send(sqs, url, "a", 0), send(sqs, url, "b", 0)]
    sent += send_batch(sqs, url, [("b", 1), ("a", 1), ("c", 0)])
    sent.append(send(sqs, url, "a", 2))
    sequence = [s["SequenceNumber"] for s in sent]
    assert all(len(n) == 20 and n.isdigit() for n in sequence), sequence
    assert [int(n) for n in sequence] == sorted({int(n) for n in sequence}), "strictly increasing in send order"
    received = rcv(sqs, url)
    by_body = {m["Body"]: m["Attributes"]["SequenceNumber"] for m in received}
    sent_bodies = ["a:0", "b:0", "b:1", "a:1", "c:0", "a:2"]
    assert by_body == dict(zip(sent_bodies, sequence)), "the receive reports the send's SequenceNumber"


def test_a_standard_queue_has_no_sequence_numbers(sqs, queue_url):
    assert "SequenceNumber" not in sqs.send_message(QueueUrl=queue_url, MessageBody="x")
    [message] = rcv(sqs, queue_url)
    assert "SequenceNumber" not in message["Attributes"]


def test_a_fifo_message_carries_its_group_deduplication_id_and_sequence_number(sqs, make_queue):
    url = make_fifo(make_queue)
    sent = send(sqs, url, "grp-1", 0, MessageDeduplicationId="dedup-1")
    [message] = rcv(sqs, url)
    attributes = message["Attributes"]
    assert attributes["MessageGroupId"] == "grp-1"
    assert attributes["MessageDeduplicationId"] == "dedup-1"
    assert attributes["SequenceNumber"] == sent["SequenceNumber"]
    assert message["MessageId"] == sent["MessageId"]


# --- deduplication ----------------------------------------------------------------------------


def test_a_resend_within_five_minutes_is_answered_with_the_first_ids_but_not_enqueued(sqs, make_queue, clock):
    url = make_fifo(make_queue)
    first = send(sqs, url, "g", 0, MessageDeduplicationId="same")
    clock.advance(150)
    again = sqs.send_message(QueueUrl=url, MessageBody="another body", MessageGroupId="g",
                             MessageDeduplicationId="same")
    assert (again["MessageId"], again["SequenceNumber"]) == (first["MessageId"], first["SequenceNumber"])
    assert again["MD5OfMessageBody"] != first["MD5OfMessageBody"], "the MD5 is of the body sent this time"
    clock.advance(149)  # 299 s after the first send: still inside the window
    assert send(sqs, url, "g", 0, MessageDeduplicationId="same")["MessageId"] == first["MessageId"]
    assert got(rcv(sqs, url)) == ["g:0"]
    assert counts(sqs, url) == Counts(0, 1, 0)


def test_after_five_minutes_the_same_deduplication_id_enqueues_a_new_message(sqs, make_queue, clock):
    url = make_fifo(make_queue)
    first = send(sqs, url, "g", 0, MessageDeduplicationId="same")
    clock.advance(301)
    second = send(sqs, url, "g", 1, MessageDeduplicationId="same")
    assert second["MessageId"] != first["MessageId"]
    assert int(second["SequenceNumber"]) > int(first["SequenceNumber"])
    assert got(rcv(sqs, url)) == ["g:0", "g:1"]


def test_the_deduplication_window_runs_on_after_the_message_is_deleted(sqs, make_queue, clock):
    url = make_fifo(make_queue)
    first = send(sqs, url, "g", 0, MessageDeduplicationId="once")
    delete_all(sqs, url, rcv(sqs, url))
    clock.advance(60)
    assert send(sqs, url, "g", 0, MessageDeduplicationId="once")["MessageId"] == first["MessageId"]
    assert rcv(sqs, url) == []
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_duplicate_within_one_batch_is_answered_with_the_first_entrys_ids(sqs, make_queue):
    url = make_fifo(make_queue)
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "one", "MessageBody": "first", "MessageGroupId": "g", "MessageDeduplicationId": "dup"},
        {"Id": "two", "MessageBody": "second", "MessageGroupId": "g", "MessageDeduplicationId": "dup"},
        {"Id": "three", "MessageBody": "third", "MessageGroupId": "g", "MessageDeduplicationId": "other"},
    ])
    assert not resp.get("Failed")
    ok = {e["Id"]: e for e in resp["Successful"]}
    assert ok["one"]["MessageId"] == ok["two"]["MessageId"]
    assert ok["one"]["SequenceNumber"] == ok["two"]["SequenceNumber"]
    assert got(rcv(sqs, url)) == ["first", "third"]


def test_content_based_deduplication_is_the_sha256_of_the_body_alone(sqs, make_queue):
    url = make_fifo(make_queue, ContentBasedDeduplication="true")
    first = sqs.send_message(QueueUrl=url, MessageBody="payload", MessageGroupId="g")
    duplicate = sqs.send_message(
        QueueUrl=url, MessageBody="payload", MessageGroupId="g",
        MessageAttributes={"differs": {"DataType": "String", "StringValue": "yes"}})
    assert duplicate["MessageId"] == first["MessageId"], "attributes are not part of the content"
    explicit = sqs.send_message(QueueUrl=url, MessageBody="other body", MessageGroupId="g",
                                MessageDeduplicationId=sha256_hex("payload"))
    assert explicit["MessageId"] == first["MessageId"], "an explicit id equal to the hash is the same id"
    different = sqs.send_message(QueueUrl=url, MessageBody="payload2", MessageGroupId="g")
    assert different["MessageId"] != first["MessageId"]
    received = rcv(sqs, url)
    assert got(received) == ["payload", "payload2"]
    assert received[0]["Attributes"]["MessageDeduplicationId"] == sha256_hex("payload")


def test_an_explicit_deduplication_id_overrides_content_based_deduplication(sqs, make_queue):
    url = make_fifo(make_queue, ContentBasedDeduplication="true")
    a = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g", MessageDeduplicationId="d1")
    b = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g", MessageDeduplicationId="d2")
    assert a["MessageId"] != b["MessageId"]
    assert [m["Attributes"]["MessageDeduplicationId"] for m in rcv(sqs, url)] == ["d1", "d2"]


def test_turning_on_content_based_deduplication_later_allows_sends_without_an_id(sqs, make_queue):
    url = make_fifo(make_queue)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "true"})
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "false"})
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=url, MessageBody="y", MessageGroupId="g")
    assert got(rcv(sqs, url)) == ["x"]


def test_queue_scope_deduplicates_across_message_groups(sqs, make_queue):
    url = make_fifo(make_queue)
    first = send(sqs, url, "a", 0, MessageDeduplicationId="shared")
    other_group = send(sqs, url, "b", 0, MessageDeduplicationId="shared")
    assert other_group["MessageId"] == first["MessageId"]
    assert got(rcv(sqs, url)) == ["a:0"]


def test_message_group_scope_deduplicates_within_each_group_only(sqs, make_queue):
    url = make_fifo(make_queue, DeduplicationScope="messageGroup")
    a = send(sqs, url, "a", 0, MessageDeduplicationId="shared")
    b = send(sqs, url, "b", 0, MessageDeduplicationId="shared")
    a_again = send(sqs, url, "a", 1, MessageDeduplicationId="shared")
    assert a["MessageId"] != b["MessageId"]
    assert a_again["MessageId"] == a["MessageId"]
    assert sorted(got(rcv(sqs, url))) == ["a:0", "b:0"]


def test_message_group_scope_with_content_based_deduplication_is_per_group(sqs, make_queue):
    url = make_fifo(make_queue, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId",
                    ContentBasedDeduplication="true")
    for group in ("a", "b", "a", "b"):
        sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId=group)
    received = rcv(sqs, url)
    assert sorted(m["Attributes"]["MessageGroupId"] for m in received) == ["a", "b"]


# --- delays ----------------------------------------------------------------------------------


def test_a_fifo_queue_delay_holds_each_message_back_without_blocking_other_groups(sqs, make_queue, clock):
    url = make_fifo(make_queue, DelaySeconds="10")
    send(sqs, url, "a", 0)
    clock.advance(5)
    send(sqs, url, "b", 0)
    assert counts(sqs, url) == Counts(0, 0, 2)
    clock.advance(6)  # a:0 is due, b:0 has 4 s to go
    assert got(rcv(sqs, url)) == ["a:0"]
    clock.advance(5)
    assert got(rcv(sqs, url)) == ["b:0"], "b:0 is delivered while a:0 is in flight"


def test_a_later_message_is_not_delivered_before_an_earlier_delayed_one_of_its_group(sqs, make_queue, clock):
    url = make_fifo(make_queue, DelaySeconds="60")
    send(sqs, url, "g", 0)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"})
    send(sqs, url, "g", 1)
    send(sqs, url, "h", 0)
    received = rcv(sqs, url)
    assert got(received) == ["h:0"]
    delete_all(sqs, url, received)
    clock.advance(61)
    assert got(rcv(sqs, url)) == ["g:0", "g:1"]


# --- across a restart ----------------------------------------------------------------------------


def restart(server_factory, db, old, make_client):
    old.stop()
    new = server_factory(db, "--test-clock")
    client = make_client(new.endpoint)
    return new, client


@pytest.mark.server_process
def test_sequence_numbers_keep_increasing_across_a_restart_after_the_newest_messages_were_deleted(
        server_factory, tmp_path, make_client, serve_with_client):
    db = tmp_path / "sequence.db"
    first, client = serve_with_client(db)
    url = client.create_queue(QueueName="seq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sent = [send(client, url, "g", i) for i in range(3)]
    delete_all(client, url, rcv(client, url))
    second, client = restart(server_factory, db, first, make_client)
    url = client.get_queue_url(QueueName="seq.fifo")["QueueUrl"]
    after = send(client, url, "g", 3)
    assert int(after["SequenceNumber"]) > int(sent[-1]["SequenceNumber"]), \
        (after["SequenceNumber"], [s["SequenceNumber"] for s in sent])
    second.stop()


@pytest.mark.server_process
def test_deduplication_ids_and_held_groups_survive_a_restart(server_factory, tmp_path, make_client, serve_with_client):
    db = tmp_path / "fifo-state.db"
    first, client = serve_with_client(db)
    url = client.create_queue(QueueName="state.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    original = send(client, url, "g", 0, MessageDeduplicationId="kept")
    send(client, url, "g", 1)
    [held] = rcv(client, url, 1, VisibilityTimeout=600)
    second, client = restart(server_factory, db, first, make_client)
    url = client.get_queue_url(QueueName="state.fifo")["QueueUrl"]
    assert send(client, url, "g", 9, MessageDeduplicationId="kept")["MessageId"] == original["MessageId"]
    assert rcv(client, url) == [], "g:1 still waits for g:0"
    client.delete_message(QueueUrl=url, ReceiptHandle=held["ReceiptHandle"])
    assert got(rcv(client, url)) == ["g:1"]
    second.stop()
