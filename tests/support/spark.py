"""Helpers of the Spark tests: queue counts, batch sends, waits. Plain functions, no PySpark."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from support import server


def send(sqs: Any, queue_url: str, bodies: list[str], **kwargs: Any) -> None:
    """SendMessageBatch, ten a call; kwargs(i) may give per-message extras via a callable."""
    for start in range(0, len(bodies), 10):
        entries = []
        for i, body in enumerate(bodies[start:start + 10], start):
            entry: dict[str, Any] = {"Id": str(i - start), "MessageBody": body}
            for key, value in kwargs.items():
                entry[key] = value(i) if callable(value) else value
            entries.append(entry)
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        assert not response.get("Failed"), response["Failed"]


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    return server.wait_for(predicate, what, timeout, interval=0.05)


def load(source: Any, endpoint: str, queue_url: str, **options: str) -> Any:
    """A queueserver DataFrame from `source` (spark.read or spark.readStream) with these options."""
    reader = source.format("queueserver").option("endpoint", endpoint).option("queue", queue_url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
