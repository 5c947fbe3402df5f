"""Plain helpers for the FIFO and fair-queue tests (no fixtures here).

Bodies name their group and their place in it ("g1:3"), so a test can read the
order it was given straight off the messages it received.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from typing import Any

from support.sqs import receive, unique_queue_name

ALL = ["All"]
PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"  # every ASCII punctuation character
JOIN = 25.0  # seconds: a hard bound on a long poll, so a broken server cannot hang the suite


def fifo_name(hint: str) -> str:
    return unique_queue_name(hint)[:70] + ".fifo"


def make_fifo(make_queue: Any, hint: str = "fifo", **attributes: str) -> str:
    """A fresh FIFO queue; keyword arguments are extra queue attributes."""
    return make_queue({"FifoQueue": "true", **attributes}, name=fifo_name(hint))


def body(group: str, index: int) -> str:
    return f"{group}:{index}"


def parse_body(text: str) -> tuple[str, int]:
    group, index = text.rsplit(":", 1)
    return group, int(index)


def send(sqs: Any, url: str, group: str, index: int, **kwargs: Any) -> dict[str, Any]:
    """Send body(group, index) to a FIFO queue with a unique deduplication id."""
    kwargs.setdefault("MessageDeduplicationId", uuid.uuid4().hex)
    return sqs.send_message(QueueUrl=url, MessageBody=body(group, index), MessageGroupId=group, **kwargs)


def send_in_turn(sqs: Any, url: str, groups: list[str], per_group: int) -> list[dict[str, Any]]:
    """Interleave the groups: g0:0, g1:0, …, g0:1, g1:1, … (one SendMessage each)."""
    return [send(sqs, url, group, i) for i in range(per_group) for group in groups]


def send_batch(sqs: Any, url: str, entries: list[tuple[str, int]], fifo: bool = True) -> list[dict[str, Any]]:
    """SendMessageBatch of (group, index) entries; every entry must succeed. Returns Successful in entry order."""
    request = []
    for n, (group, index) in enumerate(entries):
        entry: dict[str, Any] = {"Id": f"e{n}", "MessageBody": body(group, index), "MessageGroupId": group}
        if fifo:
            entry["MessageDeduplicationId"] = uuid.uuid4().hex
        request.append(entry)
    resp = sqs.send_message_batch(QueueUrl=url, Entries=request)
    assert not resp.get("Failed"), resp["Failed"]
    by_id = {entry["Id"]: entry for entry in resp["Successful"]}
    return [by_id[f"e{n}"] for n in range(len(entries))]


def got(messages: list[dict[str, Any]]) -> list[str]:
    """The bodies, in the order received."""
    return [m["Body"] for m in messages]


def rcv(sqs: Any, url: str, n: int = 10, **kwargs: Any) -> list[dict[str, Any]]:
    """A short-poll receive of up to n messages with every system attribute."""
    return receive(sqs, url, MaxNumberOfMessages=n, MessageSystemAttributeNames=ALL, **kwargs)


def delete_all(sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
    for m in messages:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def release(sqs: Any, url: str, message: dict[str, Any]) -> None:
    """Fail a message: make it visible again at once."""
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class LongPoll:
    """One ReceiveMessage with a wait, in its own thread with its own client."""

    def __init__(self, client: Any, url: str, wait: int = 20, visibility: int = 43200) -> None:
        self.result: list[dict[str, Any]] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(client, url, wait, visibility), daemon=True)
        self._thread.start()

    def _run(self, client: Any, url: str, wait: int, visibility: int) -> None:
        try:
            self.result = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait,
                                                 VisibilityTimeout=visibility).get("Messages", [])
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            self.error = exc

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, seconds: float) -> None:
        self._thread.join(seconds)

    def join(self) -> list[dict[str, Any]]:
        self._thread.join(JOIN)
        assert not self._thread.is_alive(), "the long poll never returned"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result
