"""SendMessageBatch, DeleteMessageBatch and ChangeMessageVisibilityBatch."""

from __future__ import annotations

import pytest
from support.sqs import (
    Counts,
    counts,
    md5_of_attributes,
    md5_of_body,
    raises_modeled,
    receive,
    receive_all,
    send_bodies,
)
from support.wire import raw_json_call

MIB = 1024 * 1024


def _entries(n, prefix="e"):
    return [{"Id": f"{prefix}{i}", "MessageBody": f"body-{i}"} for i in range(n)]


def _failed_by_id(resp):
    return {f["Id"]: f for f in resp.get("Failed", [])}


def _assert_failed(entry, *codes):
    assert entry["SenderFault"] is True, entry
    # Batch entries carry the error code in-band; accept the shape name or the legacy form.
    assert any(entry["Code"] == c or entry["Code"].endswith("." + c) for c in codes), entry
    assert entry.get("Message"), entry


# --- SendMessageBatch --------------------------------------------------------------------


def test_send_message_batch_sends_ten_messages_with_ids_and_md5s(sqs, queue_url):
    entries = _entries(10)
    resp = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert resp.get("Failed", []) == []
    ok = {s["Id"]: s for s in resp["Successful"]}
    assert set(ok) == {e["Id"] for e in entries}
    for e in entries:
        assert ok[e["Id"]]["MD5OfMessageBody"] == md5_of_body(e["MessageBody"])
        assert ok[e["Id"]]["MessageId"]
    assert len({s["MessageId"] for s in resp["Successful"]}) == 10
    got = receive_all(sqs, queue_url)
    assert sorted(m["Body"] for m in got) == sorted(e["MessageBody"] for e in entries)
    assert {m["MessageId"] for m in got} == {s["MessageId"] for s in resp["Successful"]}


def test_send_message_batch_entries_carry_attributes_delays_and_trace_headers(
        sqs, queue_url, clock):
    attrs = {"kind": {"DataType": "String", "StringValue": "batched"},
             "n": {"DataType": "Number", "StringValue": "7"}}
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc-def"}}
    resp = sqs.send_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": "attrs", "MessageBody": "a", "MessageAttributes": attrs,
         "MessageSystemAttributes": system},
        {"Id": "delayed", "MessageBody": "d", "DelaySeconds": 30},
    ])
    ok = {s["Id"]: s for s in resp["Successful"]}
    assert ok["attrs"]["MD5OfMessageAttributes"] == md5_of_attributes(attrs)
    assert ok["attrs"]["MD5OfMessageSystemAttributes"] == md5_of_attributes(system)
    assert "MD5OfMessageAttributes" not in ok["delayed"]
    assert counts(sqs, queue_url) == Counts(1, 0, 1)
    (msg,) = receive(sqs, queue_url, MessageAttributeNames=["All"],
                     MessageSystemAttributeNames=["All"], VisibilityTimeout=600)
    assert msg["Body"] == "a"
    assert msg["MD5OfMessageAttributes"] == md5_of_attributes(attrs)
    assert msg["Attributes"]["AWSTraceHeader"] == "Root=1-abc-def"
    clock.advance(31)
    assert [m["Body"] for m in receive(sqs, queue_url)] == ["d"]


def test_a_bad_entry_fails_alone_while_the_others_are_sent(sqs, queue_url):
    resp = sqs.send_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": "good1", "MessageBody": "fine"},
        {"Id": "badchars", "MessageBody": "nul\x00here"},
        {"Id": "baddelay", "MessageBody": "x", "DelaySeconds": 901},
        {"Id": "badattr", "MessageBody": "x", "MessageAttributes": {
            "AWS.reserved": {"DataType": "String", "StringValue": "v"}}},
        {"Id": "good2", "MessageBody": "also fine"},
    ])
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert {s["Id"] for s in resp["Successful"]} == {"good1", "good2"}
    failed = _failed_by_id(resp)
    assert set(failed) == {"badchars", "baddelay", "badattr"}
    _assert_failed(failed["badchars"], "InvalidMessageContents")
    _assert_failed(failed["baddelay"], "InvalidParameterValue")
    _assert_failed(failed["badattr"], "InvalidParameterValue")
    assert sorted(m["Body"] for m in receive_all(sqs, queue_url)) == ["also fine", "fine"]


def test_a_batch_entry_over_the_queue_maximum_size_fails_alone(sqs, make_queue):
    url = make_queue({"MaximumMessageSize": "1024"})
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "small", "MessageBody": "s"},
        {"Id": "big", "MessageBody": "b" * 1025},
    ])
    assert [s["Id"] for s in resp["Successful"]] == ["small"]
    _assert_failed(_failed_by_id(resp)["big"], "InvalidParameterValue")
    assert counts(sqs, url) == Counts(1, 0, 0)


def _sized_entry(entry_id: str, size: int) -> dict:
    """An entry whose body plus attribute name, data type and value come to `size` bytes."""
    name, data_type, value = "kind", "String", "é" * 10  # 4 + 6 + 20 bytes
    return {"Id": entry_id, "MessageBody": "b" * (size - 30),
            "MessageAttributes": {name: {"DataType": data_type, "StringValue": value}}}


def test_an_entry_of_exactly_the_lowered_maximum_size_counting_its_attribute_is_sent(sqs, queue_url):
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"MaximumMessageSize": "2048"})
    resp = sqs.send_message_batch(QueueUrl=queue_url, Entries=[_sized_entry("limit", 2048),
                                                               {"Id": "small", "MessageBody": "s"}])
    assert sorted(s["Id"] for s in resp["Successful"]) == ["limit", "small"]
    assert "Failed" not in resp
    assert counts(sqs, queue_url) == Counts(2, 0, 0)
    resp = sqs.send_message_batch(QueueUrl=queue_url, Entries=[_sized_entry("over", 2049),
                                                               {"Id": "small", "MessageBody": "s"}])
    assert [s["Id"] for s in resp["Successful"]] == ["small"]
    _assert_failed(_failed_by_id(resp)["over"], "InvalidParameterValue")
    assert counts(sqs, queue_url) == Counts(3, 0, 0)


def test_a_json_batch_answer_leaves_out_an_empty_list(server, queue_name):
    """AWS sends no `"Failed": []` when every entry succeeded, and no `"Successful": []` when none did."""
    def call(action, **members):
        return raw_json_call(server.endpoint, action, members)

    queue_url = call("CreateQueue", QueueName=queue_name).json()["QueueUrl"]
    call("SendMessageBatch", QueueUrl=queue_url, Entries=[{"Id": "a", "MessageBody": "a"}, {"Id": "b", "MessageBody": "b"}])
    [a, b] = call("ReceiveMessage", QueueUrl=queue_url, MaxNumberOfMessages=2, VisibilityTimeout=60).json()["Messages"]
    calls = [
        ("SendMessageBatch", [{"Id": "x", "MessageBody": "x"}], [{"Id": "x", "MessageBody": ""}]),
        ("ChangeMessageVisibilityBatch", [{"Id": "a", "ReceiptHandle": a["ReceiptHandle"], "VisibilityTimeout": 60}],
         [{"Id": "a", "ReceiptHandle": "garbled", "VisibilityTimeout": 60}]),
        ("DeleteMessageBatch", [{"Id": "b", "ReceiptHandle": b["ReceiptHandle"]}],
         [{"Id": "b", "ReceiptHandle": "garbled"}]),
    ]
    for action, succeeding, failing in calls:
        answer = call(action, QueueUrl=queue_url, Entries=succeeding)
        assert answer.status == 200 and set(answer.json()) == {"Successful"}, (action, answer.body)
        answer = call(action, QueueUrl=queue_url, Entries=failing)
        assert answer.status == 200 and set(answer.json()) == {"Failed"}, (action, answer.body)


def test_a_batch_over_one_mebibyte_in_total_fails_with_batch_request_too_long(sqs, queue_url):
    entries = [{"Id": f"big{i}", "MessageBody": "x" * (600 * 1024)} for i in range(2)]
    with raises_modeled(sqs, "BatchRequestTooLong"):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_a_batch_of_exactly_one_mebibyte_in_total_is_accepted(sqs, queue_url):
    entries = [{"Id": f"q{i}", "MessageBody": "y" * (MIB // 4)} for i in range(4)]
    resp = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    assert len(resp["Successful"]) == 4
    assert counts(sqs, queue_url) == Counts(4, 0, 0)


def test_an_empty_send_batch_fails_with_empty_batch_request(sqs, queue_url):
    with raises_modeled(sqs, "EmptyBatchRequest"):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[])


def test_eleven_send_entries_fail_with_too_many_entries_and_send_nothing(sqs, queue_url):
    with raises_modeled(sqs, "TooManyEntriesInBatchRequest"):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=_entries(11))
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_duplicate_send_entry_ids_fail_with_ids_not_distinct_and_send_nothing(sqs, queue_url):
    entries = [{"Id": "same", "MessageBody": "one"}, {"Id": "same", "MessageBody": "two"}]
    with raises_modeled(sqs, "BatchEntryIdsNotDistinct"):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


BAD_IDS = {"space": "has space", "dot": "a.b", "81-chars": "i" * 81, "slash": "a/b", "comma": "a,b"}


@pytest.mark.parametrize("bad_id", BAD_IDS.values(), ids=BAD_IDS.keys())
def test_an_invalid_send_entry_id_fails_with_invalid_batch_entry_id_and_sends_nothing(
        sqs, queue_url, bad_id):
    with raises_modeled(sqs, "InvalidBatchEntryId"):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": "fine", "MessageBody": "ok"}, {"Id": bad_id, "MessageBody": "x"}])
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_an_80_character_entry_id_of_allowed_characters_is_accepted(sqs, queue_url):
    entry_id = ("Az09_-" * 14)[:80]
    resp = sqs.send_message_batch(QueueUrl=queue_url,
                                  Entries=[{"Id": entry_id, "MessageBody": "ok"}])
    assert [s["Id"] for s in resp["Successful"]] == [entry_id]


# --- DeleteMessageBatch ------------------------------------------------------------------


def test_delete_message_batch_deletes_every_listed_message(sqs, queue_url):
    send_bodies(sqs, queue_url, [f"d{i}" for i in range(10)])
    got = receive_all(sqs, queue_url)
    assert len(got) == 10
    entries = [{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
    resp = sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    assert sorted(s["Id"] for s in resp["Successful"]) == sorted(e["Id"] for e in entries)
    assert resp.get("Failed", []) == []
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_a_garbled_handle_in_a_delete_batch_fails_alone(sqs, queue_url):
    send_bodies(sqs, queue_url, ["x", "y"])
    got = receive_all(sqs, queue_url)
    resp = sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": "ok", "ReceiptHandle": got[0]["ReceiptHandle"]},
        {"Id": "garbled", "ReceiptHandle": "garbled-handle"},
    ])
    assert [s["Id"] for s in resp["Successful"]] == ["ok"]
    _assert_failed(_failed_by_id(resp)["garbled"], "ReceiptHandleIsInvalid")
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def test_a_stale_handle_in_a_delete_batch_deletes_nothing(sqs, queue_url):
    send_bodies(sqs, queue_url, ["s"])
    (first,) = receive(sqs, queue_url)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert len(receive(sqs, queue_url, VisibilityTimeout=600)) == 1
    resp = sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": "stale", "ReceiptHandle": first["ReceiptHandle"]}])
    assert [s["Id"] for s in resp.get("Successful", [])] == ["stale"]
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def test_an_empty_delete_batch_fails_with_empty_batch_request(sqs, queue_url):
    with raises_modeled(sqs, "EmptyBatchRequest"):
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[])


def test_eleven_delete_entries_fail_with_too_many_entries_and_delete_nothing(sqs, queue_url):
    send_bodies(sqs, queue_url, [f"k{i}" for i in range(11)])
    got = receive_all(sqs, queue_url)
    assert len(got) == 11
    entries = [{"Id": f"k{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
    with raises_modeled(sqs, "TooManyEntriesInBatchRequest"):
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    assert counts(sqs, queue_url) == Counts(0, 11, 0)


@pytest.mark.parametrize(("ids", "code"), [
    (("dup", "dup"), "BatchEntryIdsNotDistinct"),
    (("a", "b,c"), "InvalidBatchEntryId"),  # a comma beside valid ids: one bad id fails the request
])
def test_bad_delete_entry_ids_fail_the_request_and_delete_nothing(sqs, queue_url, ids, code):
    send_bodies(sqs, queue_url, ["p", "q"])
    got = receive_all(sqs, queue_url)
    with raises_modeled(sqs, code):
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": entry_id, "ReceiptHandle": m["ReceiptHandle"]} for entry_id, m in zip(ids, got)])
    assert counts(sqs, queue_url) == Counts(0, 2, 0)


def test_an_invalid_delete_entry_id_fails_with_invalid_batch_entry_id(sqs, queue_url):
    send_bodies(sqs, queue_url, ["r"])
    (msg,) = receive(sqs, queue_url)
    with raises_modeled(sqs, "InvalidBatchEntryId"):
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": "bad id!", "ReceiptHandle": msg["ReceiptHandle"]}])
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


# --- ChangeMessageVisibilityBatch --------------------------------------------------------


def test_change_message_visibility_batch_changes_each_listed_message(sqs, queue_url, clock):
    send_bodies(sqs, queue_url, ["zero", "long"])
    got = {m["Body"]: m for m in receive_all(sqs, queue_url, VisibilityTimeout=30)}
    resp = sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
        {"Id": "zero", "ReceiptHandle": got["zero"]["ReceiptHandle"], "VisibilityTimeout": 0},
        {"Id": "long", "ReceiptHandle": got["long"]["ReceiptHandle"], "VisibilityTimeout": 300},
    ])
    assert sorted(s["Id"] for s in resp["Successful"]) == ["long", "zero"]
    assert resp.get("Failed", []) == []
    assert [m["Body"] for m in receive_all(sqs, queue_url, VisibilityTimeout=1000)] == ["zero"]
    clock.advance(301)
    assert [m["Body"] for m in receive_all(sqs, queue_url)] == ["long"]


def test_change_message_visibility_batch_reports_bad_entries_in_band(sqs, queue_url):
    send_bodies(sqs, queue_url, ["a", "b", "c"])
    got = {m["Body"]: m for m in receive_all(sqs, queue_url, VisibilityTimeout=600)}
    assert set(got) == {"a", "b", "c"}
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=got["b"]["ReceiptHandle"],
                                  VisibilityTimeout=0)
    [b_again] = receive_all(sqs, queue_url, VisibilityTimeout=600)
    assert b_again["Body"] == "b"
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=b_again["ReceiptHandle"])
    resp = sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
        {"Id": "ok", "ReceiptHandle": got["a"]["ReceiptHandle"], "VisibilityTimeout": 0},
        {"Id": "garbled", "ReceiptHandle": "nope", "VisibilityTimeout": 10},
        {"Id": "deleted", "ReceiptHandle": got["b"]["ReceiptHandle"], "VisibilityTimeout": 0},
        {"Id": "range", "ReceiptHandle": got["c"]["ReceiptHandle"], "VisibilityTimeout": 43201},
    ])
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert [s["Id"] for s in resp["Successful"]] == ["ok"]
    failed = _failed_by_id(resp)
    assert set(failed) == {"garbled", "deleted", "range"}
    _assert_failed(failed["garbled"], "ReceiptHandleIsInvalid")
    _assert_failed(failed["deleted"], "InvalidParameterValue")
    _assert_failed(failed["range"], "InvalidParameterValue")
    # a is visible; b is gone; c kept its 600 s.
    assert counts(sqs, queue_url) == Counts(1, 1, 0)


def test_an_empty_change_visibility_batch_fails_with_empty_batch_request(sqs, queue_url):
    with raises_modeled(sqs, "EmptyBatchRequest"):
        sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[])


def test_eleven_change_visibility_entries_fail_with_too_many_entries_and_change_nothing(
        sqs, queue_url):
    send_bodies(sqs, queue_url, [f"c{i}" for i in range(11)])
    got = receive_all(sqs, queue_url, VisibilityTimeout=600)
    entries = [{"Id": f"c{i}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
               for i, m in enumerate(got)]
    with raises_modeled(sqs, "TooManyEntriesInBatchRequest"):
        sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries)
    assert counts(sqs, queue_url) == Counts(0, 11, 0)


def test_duplicate_change_visibility_entry_ids_fail_with_ids_not_distinct(sqs, queue_url):
    send_bodies(sqs, queue_url, ["u", "v"])
    got = receive_all(sqs, queue_url, VisibilityTimeout=600)
    with raises_modeled(sqs, "BatchEntryIdsNotDistinct"):
        sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
            {"Id": "dup", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for m in got])
    assert counts(sqs, queue_url) == Counts(0, 2, 0)


def test_an_invalid_change_visibility_entry_id_fails_with_invalid_batch_entry_id(
        sqs, queue_url):
    send_bodies(sqs, queue_url, ["w"])
    (msg,) = receive(sqs, queue_url, VisibilityTimeout=600)
    with raises_modeled(sqs, "InvalidBatchEntryId"):
        sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
            {"Id": "x" * 81, "ReceiptHandle": msg["ReceiptHandle"], "VisibilityTimeout": 0}])
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def test_a_delete_batch_deletes_each_message_named_by_its_latest_handle_and_no_other(sqs, queue_url):
    send_bodies(sqs, queue_url, ["kept", "both", "twice"])
    first = {m["Body"]: m["ReceiptHandle"] for m in receive_all(sqs, queue_url)}
    for handle in first.values():
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    latest = {m["Body"]: m["ReceiptHandle"] for m in receive_all(sqs, queue_url)}
    assert latest.keys() == first.keys() == {"kept", "both", "twice"}
    resp = sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": "kept-stale", "ReceiptHandle": first["kept"]},
        {"Id": "both-stale", "ReceiptHandle": first["both"]},
        {"Id": "both-latest", "ReceiptHandle": latest["both"]},
        {"Id": "twice-1", "ReceiptHandle": latest["twice"]},
        {"Id": "twice-2", "ReceiptHandle": latest["twice"]},
    ])
    assert sorted(s["Id"] for s in resp["Successful"]) == [
        "both-latest", "both-stale", "kept-stale", "twice-1", "twice-2"]
    assert resp.get("Failed", []) == []
    assert counts(sqs, queue_url) == Counts(0, 1, 0)  # only "kept" is left, in flight under its latest handle
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=latest["kept"])
    assert counts(sqs, queue_url) == Counts(0, 0, 0)
