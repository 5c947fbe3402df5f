"""What a handler's result means, and what happens to a message whose handler failed.

A handler succeeds by returning anything but `Outcome.FAILED`, and fails by raising
or by returning `Outcome.FAILED` (for an expected failure that needs no traceback).
A failure policy then decides when SQS shows the message again; after the queue's
`maxReceiveCount` receives, its RedrivePolicy moves it to the dead-letter queue, so
the worker itself never has to count attempts or talk to a second queue.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# SQS: a visibility timeout, and its total since the receive, are at most 12 h. limits.py says so too:
# the consumer imports nothing of the server, so that it runs unchanged against AWS.
MAX_VISIBILITY_SECONDS = 43_200


class Outcome(enum.Enum):
    """A handler may return one of these; anything else it returns counts as success."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


def receive_count(message: Mapping[str, Any]) -> int:
    """The message's ApproximateReceiveCount (1 if the receive did not ask for it)."""
    try:
        return max(1, int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1)))
    except (TypeError, ValueError):
        return 1


class FailurePolicy(Protocol):
    """Decides what a failed message's visibility becomes."""

    def visibility_after_failure(self, message: Mapping[str, Any]) -> int | None:
        """Seconds until the message is visible again, or None to leave its visibility as it is."""
        ...


@dataclass(frozen=True)
class LeaveToExpire:
    """Do nothing: the message comes back when its current visibility runs out (SQS's own default).

    Chosen as the default because it needs no call and is what a plain SQS consumer does.
    """

    def visibility_after_failure(self, message: Mapping[str, Any]) -> int | None:
        return None


@dataclass(frozen=True)
class MakeVisibleNow:
    """ChangeMessageVisibility 0: the message can be received again at once.

    For failures that are worth retrying immediately (a lost race, a flaky dependency);
    with a RedrivePolicy the message still reaches the dead-letter queue quickly.
    """

    def visibility_after_failure(self, message: Mapping[str, Any]) -> int | None:
        return 0


@dataclass(frozen=True)
class ExponentialBackoff:
    """Hide the message for `initial_seconds * multiplier ** (receives - 1)`, at most `max_seconds`.

    The receive count comes from SQS (ApproximateReceiveCount), not from the worker's
    memory, so the backoff keeps growing across workers and restarts.
    """

    initial_seconds: float = 1.0
    multiplier: float = 2.0
    max_seconds: int = 900

    def __post_init__(self) -> None:
        if self.initial_seconds < 0 or self.multiplier < 1:
            raise ValueError("ExponentialBackoff needs initial_seconds >= 0 and multiplier >= 1")
        if not 0 <= self.max_seconds <= MAX_VISIBILITY_SECONDS:
            raise ValueError(f"ExponentialBackoff.max_seconds must be 0..{MAX_VISIBILITY_SECONDS}")

    def visibility_after_failure(self, message: Mapping[str, Any]) -> int | None:
        exponent = receive_count(message) - 1
        try:
            delay = self.initial_seconds * self.multiplier ** exponent
        except OverflowError:
            delay = math.inf
        if delay >= self.max_seconds:
            return self.max_seconds
        return math.ceil(delay)


def policy_from_name(name: str, backoff_initial: float = 1.0, backoff_max: int = 900) -> FailurePolicy:
    """The policy a command-line name stands for: expire, visible-now or backoff."""
    if name == "expire":
        return LeaveToExpire()
    if name == "visible-now":
        return MakeVisibleNow()
    if name == "backoff":
        return ExponentialBackoff(initial_seconds=backoff_initial, max_seconds=backoff_max)
    raise ValueError(f"unknown failure policy {name!r} (expected expire, visible-now or backoff)")
