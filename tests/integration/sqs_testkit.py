"""Plain helpers shared by the integration tests (no fixtures here).

Everything below talks to the server only through its public wire protocol:
boto3 for the normal paths, and a small SigV4-signed urllib helper for raw
requests that boto3 refuses to build (garbage bodies, lone surrogates, ...).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import struct
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

# The legacy (Query-era) error code that botocore puts in Error.Code, by the
# JSON shape name that botocore puts in Error.QueryErrorCode (SQS.md 1.8).
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
# code seen in the wild (Query era) is InvalidParameterValue (SQS.md 1.2).
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


# --- MD5s (SQS.md 1.4) -------------------------------------------------------


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
    for _ in range(1000):
        batch = receive(client, queue_url, **kwargs)
        if not batch:
            return got
        assert len(batch) <= kwargs["MaxNumberOfMessages"]
        got.extend(batch)
    raise AssertionError("receive_all never drained the queue")


def send_bodies(client: Any, queue_url: str, bodies: list[str]) -> list[str]:
    ids = []
    for body in bodies:
        resp = client.send_message(QueueUrl=queue_url, MessageBody=body)
        assert resp["MD5OfMessageBody"] == md5_of_body(body)
        ids.append(resp["MessageId"])
    return ids


# --- raw HTTP ------------------------------------------------------------------


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def raw_request(
    endpoint: str,
    body: bytes,
    *,
    target: str | None = None,
    content_type: str = "application/x-amz-json-1.0",
    region: str = "us-east-1",
    sign: bool = True,
    method: str = "POST",
    path: str = "/",
    timeout: float = 30,
) -> RawResponse:
    """Send one hand-made request and return status, headers and body (never raises on 4xx/5xx)."""
    url = endpoint.rstrip("/") + path
    headers = {"Content-Type": content_type}
    if target is not None:
        headers["X-Amz-Target"] = target
    if sign:
        aws_req = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(Credentials("test", "test"), "sqs", region).add_auth(aws_req)
        headers = dict(aws_req.headers.items())
    req = urllib.request.Request(url, data=body if method != "GET" else None, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return RawResponse(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
    except urllib.error.HTTPError as e:
        with e:
            return RawResponse(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())


def raw_json_call(endpoint: str, action: str, payload: Any, **kwargs: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
    return raw_request(endpoint, body, target=f"AmazonSQS.{action}", **kwargs)


# --- the manual clock --------------------------------------------------------------


class ClockControl:
    """Drives a `--test-clock` server's manual clock through /_queueserver/clock."""

    def __init__(self, endpoint: str):
        self.url = endpoint.rstrip("/") + "/_queueserver/clock"

    def _call(self, method: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(self.url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
            result: dict[str, Any] = json.loads(resp.read())
            return result

    def now_ms(self) -> int:
        return int(self._call("GET")["now_ms"])

    def timers(self) -> int:
        """Wake-ups pending on the server's manual clock: each waiting long poll has one."""
        return int(self._call("GET")["timers"])

    def wait_for_timers(self, count: int, timeout: float = 10) -> None:
        """Until at least `count` wake-ups are pending: a long poll started has reached its wait."""
        deadline = time.monotonic() + timeout
        while self.timers() < count:
            assert time.monotonic() < deadline, f"no {count} long polls were waiting after {timeout}s"
            time.sleep(0.01)

    def advance(self, seconds: float) -> int:
        """Move the clock forward; returns the new now_ms."""
        before = self.now_ms()
        now = int(self._call("POST", {"advance_seconds": float(seconds)})["now_ms"])
        assert now >= before + int(seconds * 1000) - 1, (before, now, seconds)
        return now
