"""Hooks for logging and metrics, and the counters a worker keeps.

Why one `Reporter` in front of both: every event (received, succeeded, extended…)
must bump its counter and call its hook in the same place, so the two never
disagree; and a hook that raises must cost a log line, not a message.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Message = dict[str, Any]


@dataclass(frozen=True)
class WorkerCounters:
    """A snapshot of what a worker has done so far (read it from any thread)."""

    received: int = 0  # messages received
    succeeded: int = 0  # handlers that returned success
    failed: int = 0  # handlers that raised or returned Outcome.FAILED
    deleted: int = 0  # messages DeleteMessageBatch confirmed
    extended: int = 0  # visibility extensions SQS accepted (one per message per heartbeat)
    released: int = 0  # messages made visible again without being handled (shutdown, FIFO group rest)
    lost: int = 0  # messages dropped from tracking: invalid receipt handle, 12-hour limit, expired
    abandoned: int = 0  # handlers still running when the shutdown grace period ended
    heartbeats: int = 0  # heartbeat rounds completed
    errors: int = 0  # SQS calls that failed as a whole


class WorkerHooks:
    """Subclass and override what you need; every method is called on the worker's event loop.

    Keep hooks quick and non-blocking: they run between SQS calls and handlers.
    """

    def on_received(self, message: Message) -> None:
        """A message was received (and is now tracked by the heartbeat)."""

    def on_succeeded(self, message: Message, seconds: float) -> None:
        """Its handler returned success after `seconds` (the delete follows, batched)."""

    def on_failed(self, message: Message, error: BaseException | None, seconds: float) -> None:
        """Its handler raised `error`, or returned Outcome.FAILED (error is None)."""

    def on_deleted(self, message: Message) -> None:
        """SQS confirmed the delete."""

    def on_extended(self, message: Message, visibility_timeout: int) -> None:
        """The heartbeat extended its visibility to `visibility_timeout` seconds from now."""

    def on_released(self, message: Message) -> None:
        """It was made visible again without being handled (shutdown, or a failed FIFO predecessor)."""

    def on_lost(self, message: Message, reason: str) -> None:
        """The worker can no longer keep it invisible (e.g. its receipt handle became invalid)."""

    def on_heartbeat(self, due: int, extended: int) -> None:
        """A heartbeat round ended: `due` messages needed extending, `extended` were."""

    def on_error(self, operation: str, error: BaseException) -> None:
        """An SQS call (`operation`, e.g. "ReceiveMessage") failed as a whole."""


class Reporter:
    """Counts each event and forwards it to the hooks, shielding the worker from hook errors."""

    def __init__(self, hooks: WorkerHooks | None) -> None:
        self._hooks = hooks or WorkerHooks()
        self._lock = threading.Lock()
        self._counts = WorkerCounters()

    def snapshot(self) -> WorkerCounters:
        with self._lock:
            return self._counts

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts = dataclasses.replace(self._counts, **{name: getattr(self._counts, name) + n})

    def _event(self, name: str, *args: Any) -> None:
        """Count the event and call its hook (`on_<name>`)."""
        self._count(name)
        self._call(f"on_{name}", *args)

    def _call(self, hook: str, *args: Any) -> None:
        try:
            getattr(self._hooks, hook)(*args)
        except Exception:
            log.exception("worker hook %s raised; ignored", hook)

    def received(self, message: Message) -> None:
        self._event("received", message)

    def succeeded(self, message: Message, seconds: float) -> None:
        self._event("succeeded", message, seconds)

    def failed(self, message: Message, error: BaseException | None, seconds: float) -> None:
        self._event("failed", message, error, seconds)

    def deleted(self, message: Message) -> None:
        self._event("deleted", message)

    def extended(self, message: Message, visibility_timeout: int) -> None:
        self._event("extended", message, visibility_timeout)

    def released(self, message: Message) -> None:
        self._event("released", message)

    def lost(self, message: Message, reason: str) -> None:
        self._count("lost")
        log.warning("message %s is no longer kept invisible: %s", message.get("MessageId"), reason)
        self._call("on_lost", message, reason)

    def abandoned(self, n: int) -> None:
        self._count("abandoned", n)

    def heartbeat(self, due: int, extended: int) -> None:
        self._count("heartbeats")
        self._call("on_heartbeat", due, extended)

    def error(self, operation: str, error: BaseException) -> None:
        self._count("errors")
        log.warning("%s failed: %s", operation, error)
        self._call("on_error", operation, error)
