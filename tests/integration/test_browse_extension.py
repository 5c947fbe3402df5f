"""QueueserverBrowseMessages: reading a queue without receiving from it (a queueserver extension)."""

from __future__ import annotations

from typing import Any

from support.sqs import counts, receive
from support.wire import raw_json_call


def browse(endpoint: str, queue_url: str, **members: Any) -> dict[str, Any]:
    response = raw_json_call(endpoint, "QueueserverBrowseMessages", {"QueueUrl": queue_url, **members})
    assert response.status == 200, response.body
    return response.json()


def test_browsing_twice_returns_the_same_messages_and_changes_nothing(server: Any, sqs: Any, queue_url: str) -> None:
    for i in range(4):
        sqs.send_message(QueueUrl=queue_url, MessageBody=f"m{i}",
                         MessageAttributes={"kind": {"DataType": "String", "StringValue": "k"}})
    [held] = receive(sqs, queue_url, MaxNumberOfMessages=1, VisibilityTimeout=300)
    before = counts(sqs, queue_url)
    first = browse(server.endpoint, queue_url)
    second = browse(server.endpoint, queue_url)
    assert first == second
    assert [m["Body"] for m in first["Messages"]] == ["m0", "m1", "m2", "m3"]
    states = {m["Body"]: m["State"] for m in first["Messages"]}
    assert states[held["Body"]] == "in_flight"
    assert sorted(states.values()) == ["in_flight", "visible", "visible", "visible"]
    assert all("ReceiptHandle" not in m for m in first["Messages"])
    assert first["Messages"][0]["MessageAttributes"] == {"kind": {"DataType": "String", "StringValue": "k"}}
    assert counts(sqs, queue_url) == before
    assert before.visible == 3
    received_counts = {m["Body"]: m["Attributes"]["ApproximateReceiveCount"] for m in second["Messages"]}
    assert received_counts == {held["Body"]: "1", **{b: "0" for b in states if b != held["Body"]}}


def test_browsing_pages_through_a_queue_with_next_token(server: Any, sqs: Any, queue_url: str) -> None:
    sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(7)])
    seen, token = [], None
    while True:
        page = browse(server.endpoint, queue_url, MaxNumberOfMessages=3, **({"NextToken": token} if token else {}))
        seen += [m["Body"] for m in page["Messages"]]
        token = page.get("NextToken")
        if token is None:
            break
    assert seen == [f"m{i}" for i in range(7)]


def test_browsing_an_unknown_queue_is_queue_does_not_exist(server: Any) -> None:
    response = raw_json_call(server.endpoint, "QueueserverBrowseMessages",
                             {"QueueUrl": f"{server.endpoint}/000000000000/no-such-queue"})
    assert response.status == 400
    assert response.json()["__type"].endswith("QueueDoesNotExist")
