"""The rows `queues`, `subscriptions` and `stats` show: a queue's or a subscription's counts, oldest age, DLQ."""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

from queueserver.admin_cli import client
from queueserver.admin_cli.client import Admin, AdminError
from queueserver.extensions import BROWSE_ACTION

LIST_PAGE = 1000  # ListQueues' largest page


def _dead_letter_queue(attributes: dict[str, str]) -> str | None:
    policy = attributes.get("RedrivePolicy")
    return json.loads(policy)["deadLetterTargetArn"].rpartition(":")[2] if policy else None


def _oldest_age(admin: Admin, url: str) -> int | None:
    """Seconds since the oldest message was sent, from a browse (a queueserver extension; None elsewhere)."""
    try:
        messages = admin.extension(BROWSE_ACTION, {"QueueUrl": url, "MaxNumberOfMessages": 1}).get("Messages", [])
    except AdminError as exc:
        if exc.exit_code == client.UNREACHABLE:
            raise
        return None
    if not messages:
        return None
    return max(0, int(time.time()) - int(messages[0]["Attributes"]["SentTimestamp"]) // 1000)


def queue_row(admin: Admin, name: str, url: str) -> dict[str, Any] | None:
    """name, url, counts, oldest age and dead-letter queue; None if it was deleted since it was listed."""
    try:
        attributes = admin.call("get_queue_attributes", QueueUrl=url, AttributeNames=["All"])["Attributes"]
    except AdminError as exc:
        if exc.exit_code == client.NO_SUCH_QUEUE:
            return None
        raise
    return {"name": name, "url": url,
            "visible": int(attributes["ApproximateNumberOfMessages"]),
            "in_flight": int(attributes["ApproximateNumberOfMessagesNotVisible"]),
            "delayed": int(attributes["ApproximateNumberOfMessagesDelayed"]),
            "oldest_age_seconds": _oldest_age(admin, url),
            "dead_letter_queue": _dead_letter_queue(attributes)}


def subscription_rows(admin: Admin, queue_url: str) -> list[dict[str, Any]]:
    """A row per subscription of the queue (by name), each with its own counts."""
    rows = []
    for found in admin.subscriptions(queue_url):
        row = queue_row(admin, found["SubscriptionName"], found["SubscriptionUrl"])
        if row is not None:
            rows.append(row)
    return rows


def queue_pages(admin: Admin, prefix: str, limit: int | None,
                next_token: str | None = None) -> Iterator[tuple[list[dict[str, Any]], str | None]]:
    """The queues' rows a ListQueues page at a time (from `next_token`, at most `limit`; None: all), each
    with its subscriptions' rows under `subscriptions` (None where the endpoint has none: AWS SQS); with
    each page, the NextToken that lists the queues after it (None: there are none)."""
    params: dict[str, Any] = {"QueueNamePrefix": prefix} if prefix else {}
    if next_token:
        params["NextToken"] = next_token
    with_subscriptions = True
    left = limit
    while left is None or left > 0:
        params["MaxResults"] = LIST_PAGE if left is None else min(LIST_PAGE, left)
        page = admin.call("list_queues", **params)
        urls = page.get("QueueUrls", [])
        if left is not None:
            left -= len(urls)
        rows = []
        for url in urls:
            row = queue_row(admin, url.rstrip("/").rpartition("/")[2], url)
            if row is None:
                continue
            row["subscriptions"] = None
            if with_subscriptions:
                try:
                    row["subscriptions"] = subscription_rows(admin, url)
                except AdminError as exc:
                    if exc.exit_code == client.NO_SUCH_QUEUE:  # deleted since the listing
                        continue
                    if exc.exit_code != client.UNSUPPORTED:
                        raise
                    with_subscriptions = False  # asked once: the endpoint has no subscriptions at all
            rows.append(row)
        token = page.get("NextToken")
        yield rows, token
        if token is None:
            return
        params["NextToken"] = token
