"""A queue tagged `queueserver:atomic-batches=true` stores a SendMessageBatch whole or not at all: one
invalid entry fails every entry, each with its own reason, and nothing is stored. Without the tag an
invalid entry fails alone, as on SQS. Set through CreateQueue's tags or TagQueue, from any SDK."""

from __future__ import annotations

from typing import Any

from support.sqs import receive_all

ATOMIC = {"queueserver:atomic-batches": "true"}


def mixed_batch() -> list[dict[str, Any]]:
    return [{"Id": "good1", "MessageBody": "one"}, {"Id": "bad", "MessageBody": "x", "DelaySeconds": 9999},
            {"Id": "good2", "MessageBody": "two"}]


def test_a_batch_with_an_invalid_entry_stores_nothing_on_an_atomic_queue(sqs: Any, make_queue: Any) -> None:
    url = make_queue(tags=ATOMIC)
    answer = sqs.send_message_batch(QueueUrl=url, Entries=mixed_batch())
    assert "Successful" not in answer or answer["Successful"] == []
    failed = {f["Id"]: f for f in answer["Failed"]}
    assert set(failed) == {"good1", "bad", "good2"}
    assert failed["bad"]["Code"] == "InvalidParameterValue"
    assert "DelaySeconds" in failed["bad"]["Message"]
    for valid in ("good1", "good2"):
        assert failed[valid]["Code"] == "BatchEntryNotStored" and failed[valid]["SenderFault"] is True
        assert "entries bad are invalid" in failed[valid]["Message"]
    assert receive_all(sqs, url) == []


def test_a_valid_batch_on_an_atomic_queue_is_stored_whole(sqs: Any, make_queue: Any) -> None:
    url = make_queue(tags=ATOMIC)
    answer = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": f"e{i}", "MessageBody": f"m{i}"} for i in range(10)])
    assert len(answer["Successful"]) == 10 and not answer.get("Failed")
    assert sorted(m["Body"] for m in receive_all(sqs, url)) == sorted(f"m{i}" for i in range(10))


def test_the_tag_set_later_turns_it_on_and_without_it_the_valid_entries_are_stored(sqs: Any, make_queue: Any) -> None:
    url = make_queue()
    answer = sqs.send_message_batch(QueueUrl=url, Entries=mixed_batch())
    assert [f["Id"] for f in answer["Failed"]] == ["bad"]
    assert sorted(m["Body"] for m in receive_all(sqs, url)) == ["one", "two"]
    sqs.tag_queue(QueueUrl=url, Tags=ATOMIC)
    answer = sqs.send_message_batch(QueueUrl=url, Entries=mixed_batch())
    assert len(answer["Failed"]) == 3
    assert receive_all(sqs, url) == []
