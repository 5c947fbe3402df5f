"""Plain helpers for the dead-letter and message-move-task tests (no fixtures here)."""

from __future__ import annotations

import uuid
from typing import Any

from support.server import wait_for
from support.sqs import Counts, arn_of, counts, receive, redrive_policy, unique_queue_name

TERMINAL_STATUSES = ("COMPLETED", "CANCELLED", "FAILED")


def make_source_and_dlq(make_queue: Any, client: Any, max_receive_count: int = 1, *, fifo: bool = False,
                        source_attributes: dict[str, str] | None = None,
                        dlq_attributes: dict[str, str] | None = None) -> tuple[str, str, str]:
    """(source url, dead-letter queue url, dead-letter queue arn)."""
    suffix = ".fifo" if fifo else ""
    base = {"FifoQueue": "true"} if fifo else {}
    dlq_url = make_queue({**base, **(dlq_attributes or {})}, name=_name("dlq", suffix))
    dlq_arn = arn_of(client, dlq_url)
    source_url = make_queue({**base, **(source_attributes or {}),
                             "RedrivePolicy": redrive_policy(dlq_arn, max_receive_count)},
                            name=_name("src", suffix))
    return source_url, dlq_url, dlq_arn


def _name(stem: str, suffix: str) -> str:
    return unique_queue_name(stem) + suffix


def send_fifo(client: Any, queue_url: str, body: str, group: str | None = None, **kwargs: Any) -> str:
    return client.send_message(QueueUrl=queue_url, MessageBody=body, MessageGroupId=group or body,
                               MessageDeduplicationId=uuid.uuid4().hex, **kwargs)["MessageId"]


def send_many(client: Any, queue_url: str, n: int, prefix: str = "m") -> list[str]:
    """Send n messages in batches of 10; returns their MessageIds in send order."""
    ids: list[str] = []
    for start in range(0, n, 10):
        entries = [{"Id": f"e{i}", "MessageBody": f"{prefix}-{i}"} for i in range(start, min(n, start + 10))]
        resp = client.send_message_batch(QueueUrl=queue_url, Entries=entries)
        assert not resp.get("Failed"), resp
        by_entry = {e["Id"]: e["MessageId"] for e in resp["Successful"]}
        ids.extend(by_entry[e["Id"]] for e in entries)
    return ids


def dead_letter_all(client: Any, source_url: str, dlq_url: str, n: int) -> None:
    """With maxReceiveCount=1: receive every message once with VisibilityTimeout=0, so the
    next receive moves it. Real time does not matter: visibility 0 needs no clock."""
    for _ in range(20 * n + 50):
        if counts(client, dlq_url).visible >= n:
            break
        receive(client, source_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert counts(client, dlq_url).visible == n, counts(client, dlq_url)
    assert counts(client, source_url) == Counts(0, 0, 0)


def tasks(client: Any, source_arn: str, max_results: int = 10) -> list[dict[str, Any]]:
    return client.list_message_move_tasks(SourceArn=source_arn, MaxResults=max_results)["Results"]


def latest_task(client: Any, source_arn: str) -> dict[str, Any]:
    (task,) = client.list_message_move_tasks(SourceArn=source_arn)["Results"]
    return task


def wait_for_task(client: Any, source_arn: str, statuses: tuple[str, ...] = TERMINAL_STATUSES,
                  timeout: float = 20.0) -> dict[str, Any]:
    """Poll (real time, bounded) until the most recent task has one of `statuses`."""
    def reached() -> dict[str, Any] | None:
        task = latest_task(client, source_arn)
        return task if task["Status"] in statuses else None

    return dict(wait_for(reached, f"the move task to reach {statuses}", timeout, interval=0.05,
                         detail=lambda: str(latest_task(client, source_arn))))


def wait_for_moved(client: Any, source_arn: str, at_least: int, timeout: float = 20.0) -> int:
    """Poll (real time, bounded) until the running task has moved `at_least` messages; returns how many."""
    def moved() -> tuple[int] | None:
        count = int(latest_task(client, source_arn)["ApproximateNumberOfMessagesMoved"])
        return (count,) if count >= at_least else None

    return int(wait_for(moved, f"the move task to move {at_least} messages", timeout, interval=0.02)[0])
