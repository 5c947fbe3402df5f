"""Log lines: plain text or one JSON object a line (`--log-format json`), and the access log.

JSON lines are for log shippers (Loki, Elasticsearch, CloudWatch Logs): one object per record
with time, level, logger and message, plus the access log's fields as their own keys.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

ACCESS_LOGGER = "queueserver.access"
ACCESS_FIELDS = ("action", "queue", "status", "duration_ms")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ACCESS_FIELDS:
            if hasattr(record, name):
                line[name] = getattr(record, name)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def use_format(log_format: str) -> None:
    """Give every handler of the root logger the chosen format ("text" keeps what is set)."""
    if log_format == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())


class AccessLog:
    """One INFO line per answered request: action, queue, HTTP status, duration."""

    def __init__(self) -> None:
        self._log = logging.getLogger(ACCESS_LOGGER)
        self._log.setLevel(logging.INFO)  # asked for explicitly: shown whatever --log-level says

    def request(self, action: str, params: dict[str, Any] | None, status: int, seconds: float) -> None:
        action, queue = printable(action), printable(_queue_name(params))  # both may be the client's words
        duration_ms = round(seconds * 1000, 3)
        self._log.info("%s %s %d %.3fms", action, queue, status, duration_ms,
                       extra={"action": action, "queue": queue, "status": status, "duration_ms": duration_ms})


def _queue_name(params: dict[str, Any] | None) -> str:
    """The queue a request named (by URL or by name), or "-"."""
    if not params:
        return "-"
    url = params.get("QueueUrl")
    if isinstance(url, str) and url:
        return url.rstrip("/").rpartition("/")[2] or "-"
    name = params.get("QueueName")
    return name if isinstance(name, str) and name else "-"


def printable(text: str) -> str:
    """TEXT with every character that is not printable (control characters, line and paragraph
    separators, format characters) written as a Python escape: a client's newline in a queue URL
    must not start a forged line of the log, in text or in a JSON field a shipper splits on it."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
