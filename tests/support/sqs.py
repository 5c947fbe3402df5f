"""What SQS answers and the queue helpers every tier uses, through a client (no fixtures here).

The error checks (class, legacy code, status), the MD5s SQS computes, unique queue names,
the queue counters, receives and drains, sends, a queue's ARN and a redrive policy. Raw
requests that boto3 refuses to build are in support/wire.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError

# The legacy (Query-era) error code that botocore puts in Error.Code, by the
# JSON shape name that botocore puts in Error.QueryErrorCode.
LEGACY_CODES = {
    "QueueDoesNotExist": "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDeletedRecently": "AWS.SimpleQueueService.QueueDeletedRecently",
    "QueueNameExists": "QueueAlreadyExists",
    "PurgeQueueInProgress": "AWS.SimpleQueueService.PurgeQueueInProgress",
    "OverLimit": "OverLimit",
    "ReceiptHandleIsInvalid": "ReceiptHandleIsInvalid",
    "MessageNotInflight": "AWS.SimpleQueueService.MessageNotInflight",
    "InvalidAttributeName": "InvalidAttributeName",
    "InvalidAttributeValue": "InvalidAttributeValue",
    "InvalidMessageContents": "InvalidMessageContents",
    "TooManyEntriesInBatchRequest": "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
    "EmptyBatchRequest": "AWS.SimpleQueueService.EmptyBatchRequest",
    "BatchEntryIdsNotDistinct": "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
    "InvalidBatchEntryId": "AWS.SimpleQueueService.InvalidBatchEntryId",
    "BatchRequestTooLong": "AWS.SimpleQueueService.BatchRequestTooLong",
}

HTTP_STATUS = {"PurgeQueueInProgress": 403, "OverLimit": 403}

# A bad queue-attribute value: the model's shape is InvalidAttributeValue, the
# code seen in the wild (Query era) is InvalidParameterValue.
BAD_ATTRIBUTE_VALUE = ("InvalidAttributeValue", "InvalidParameterValue")


def assert_modeled_error(exc: BaseException, shape: str) -> None:
    """A modeled SQS error: right __type, right x-amzn-query-error, right status."""
    assert isinstance(exc, ClientError), exc
    err = exc.response["Error"]
    assert err.get("QueryErrorCode") == shape, err
    assert err["Code"] == LEGACY_CODES[shape], err
    assert err.get("Type") == "Sender", err
    assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == HTTP_STATUS.get(shape, 400)
    assert err.get("Message"), "an SQS error carries a message"


def assert_code(exc: BaseException, *codes: str, status: int = 400) -> None:
    """An error whose botocore Error.Code is one of `codes`."""
    assert isinstance(exc, ClientError), exc
    err = exc.response["Error"]
    assert err["Code"] in codes, err
    assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == status, exc.response
    assert err.get("Message"), "an SQS error carries a message"


@contextlib.contextmanager
def raises_modeled(client: Any, shape: str) -> Iterator[pytest.ExceptionInfo[Any]]:
    """`with raises_modeled(sqs, "QueueDoesNotExist"): ...` checks class, codes and status."""
    exc_class = getattr(client.exceptions, shape)
    with pytest.raises(exc_class) as info:
        yield info
    assert_modeled_error(info.value, shape)


@contextlib.contextmanager
def raises_code(*codes: str, status: int = 400) -> Iterator[pytest.ExceptionInfo[Any]]:
    with pytest.raises(ClientError) as info:
        yield info
    assert_code(info.value, *codes, status=status)


# Queue attribute values at the edges of their ranges, every one valid.
VALUES_AT_THE_EDGES = [
    ("VisibilityTimeout", "0"),
    ("VisibilityTimeout", "43200"),
    ("DelaySeconds", "900"),
    ("MaximumMessageSize", "1024"),
    ("MaximumMessageSize", "1048576"),
    ("MessageRetentionPeriod", "60"),
    ("MessageRetentionPeriod", "1209600"),
    ("ReceiveMessageWaitTimeSeconds", "20"),
]


# --- MD5s (as SQS computes them) ---------------------------------------------


def md5_of_body(body: str) -> str:
    return hashlib.md5(body.encode("utf-8")).hexdigest()


def md5_of_attributes(attributes: dict[str, dict[str, Any]]) -> str:
    buf = bytearray()
    for name in sorted(attributes):
        value = attributes[name]
        data_type = value["DataType"]
        name_bytes = name.encode("utf-8")
        type_bytes = data_type.encode("utf-8")
        buf += struct.pack(">I", len(name_bytes)) + name_bytes
        buf += struct.pack(">I", len(type_bytes)) + type_bytes
        if data_type.split(".", 1)[0] == "Binary":
            raw = value["BinaryValue"]
            if isinstance(raw, str):
                raw = raw.encode("utf-8")
            buf += b"\x02" + struct.pack(">I", len(raw)) + bytes(raw)
        else:
            raw = value["StringValue"].encode("utf-8")
            buf += b"\x01" + struct.pack(">I", len(raw)) + raw
    return hashlib.md5(bytes(buf)).hexdigest()


def unique_queue_name(hint: str = "q") -> str:
    stem = re.sub(r"[^A-Za-z0-9_-]", "-", hint)[:40].strip("-") or "q"
    return f"{stem}-{uuid.uuid4().hex[:12]}"


# --- queue state ---------------------------------------------------------------

COUNTERS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


@dataclass(frozen=True)
class Counts:
    visible: int
    in_flight: int
    delayed: int


def counts(client: Any, queue_url: str) -> Counts:
    attrs = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(COUNTERS))[
        "Attributes"
    ]
    return Counts(*(int(attrs[name]) for name in COUNTERS))


def receive(client: Any, queue_url: str, **kwargs: Any) -> list[dict[str, Any]]:
    """A short-poll receive unless WaitTimeSeconds is given; returns the list (maybe [])."""
    kwargs.setdefault("WaitTimeSeconds", 0)
    return client.receive_message(QueueUrl=queue_url, **kwargs).get("Messages", [])


def receive_all(client: Any, queue_url: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Receive until a short poll comes back empty (messages stay in flight)."""
    kwargs.setdefault("MaxNumberOfMessages", 10)
    got: list[dict[str, Any]] = []
    for _ in range(2000):
        batch = receive(client, queue_url, **kwargs)
        if not batch:
            return got
        assert len(batch) <= kwargs["MaxNumberOfMessages"]
        got.extend(batch)
    raise AssertionError("never drained the queue")


def visible(client: Any, queue_url: str) -> int:
    """ApproximateNumberOfMessages of a queue."""
    attributes = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def visible_and_in_flight(client: Any, queue_url: str) -> tuple[int, int]:
    """(visible, in flight) messages of a queue."""
    found = counts(client, queue_url)
    return found.visible, found.in_flight


def send_bodies(client: Any, queue_url: str, bodies: list[str], **kwargs: Any) -> list[str]:
    """One SendMessage per body (kwargs go to each); checks the MD5 and returns the MessageIds."""
    ids = []
    for body in bodies:
        resp = client.send_message(QueueUrl=queue_url, MessageBody=body, **kwargs)
        assert resp["MD5OfMessageBody"] == md5_of_body(body)
        ids.append(resp["MessageId"])
    return ids


def receive_and_delete_all(client: Any, queue_url: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Receive and delete until a short poll comes back empty (a consumer that empties the queue)."""
    kwargs.setdefault("MaxNumberOfMessages", 10)
    got: list[dict[str, Any]] = []
    while messages := receive(client, queue_url, **kwargs):
        got += messages
        failed = client.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]).get("Failed")
        assert not failed, failed
    return got


def drain(client: Any, queue_url: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Receive (and keep in flight for 10 minutes) until a short poll comes back empty."""
    kwargs.setdefault("VisibilityTimeout", 600)
    return receive_all(client, queue_url, **kwargs)


def queue_attribute(client: Any, queue_url: str, name: str) -> str | None:
    attrs = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[name]).get("Attributes", {})
    return attrs.get(name)


def arn_of(client: Any, queue_url: str) -> str:
    return client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]


def redrive_policy(dead_letter_arn: str, max_receive_count: int | str) -> str:
    return json.dumps({"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": max_receive_count})
