"""A worker's options, checked once, in one frozen value shared by its parts."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from queueserver.consumer.policies import (
    MAX_VISIBILITY_SECONDS,
    FailurePolicy,
    LeaveToExpire,
)

MAX_WAIT_TIME_SECONDS = 20
MAX_RECEIVE_MESSAGES = 10
# The defaults, capped so that they fit any visibility timeout (a 3 s one included).
DEFAULT_EXTENSION_THRESHOLD = 5.0
DEFAULT_HEARTBEAT_INTERVAL = 1.0


class Derived(enum.Enum):
    """A heartbeat interval not given: derived from the extension threshold (None means off)."""

    FROM_THRESHOLD = "derived"


DERIVED = Derived.FROM_THRESHOLD


@dataclass(frozen=True)
class WorkerSettings:
    """See `Worker` for what each option does; the checks here say which combinations work."""

    queue_url: str
    max_concurrency: int = 10
    visibility_timeout: int = 30
    extension_threshold: float | None = None  # None: min(5, visibility_timeout / 2)
    heartbeat_interval: float | None | Derived = DERIVED  # DERIVED: min(1, extension_threshold / 2); 0/None: off
    wait_time_seconds: int = 20
    max_messages: int = 10
    prefetch: int = 0
    failure_policy: FailurePolicy = field(default_factory=LeaveToExpire)
    shutdown_grace_period: float = 25.0
    fifo: bool | None = None
    message_attribute_names: tuple[str, ...] = ("All",)
    system_attribute_names: tuple[str, ...] = ("All",)

    def __post_init__(self) -> None:
        _check(isinstance(self.max_concurrency, int) and self.max_concurrency >= 1,
               "max_concurrency must be at least 1")
        _check(isinstance(self.visibility_timeout, int) and 1 <= self.visibility_timeout <= MAX_VISIBILITY_SECONDS,
               f"visibility_timeout must be a whole number of seconds, 1..{MAX_VISIBILITY_SECONDS}")
        _check(isinstance(self.wait_time_seconds, int) and 0 <= self.wait_time_seconds <= MAX_WAIT_TIME_SECONDS,
               f"wait_time_seconds must be a whole number of seconds, 0..{MAX_WAIT_TIME_SECONDS}")
        _check(isinstance(self.max_messages, int) and 1 <= self.max_messages <= MAX_RECEIVE_MESSAGES,
               f"max_messages must be 1..{MAX_RECEIVE_MESSAGES}")
        _check(self.prefetch >= 0, "prefetch must be >= 0")
        _check(self.shutdown_grace_period >= 0, "shutdown_grace_period must be >= 0")
        self._derive_heartbeat()
        if self.heartbeat_on:
            assert isinstance(self.heartbeat_interval, float) and self.extension_threshold is not None
            _check(0 < self.extension_threshold <= self.visibility_timeout,
                   f"extension_threshold must be > 0 and at most visibility_timeout ({self.visibility_timeout} s), "
                   f"not {self.extension_threshold:g} s")
            _check(0 < self.heartbeat_interval < self.extension_threshold,
                   "heartbeat_interval must be below extension_threshold, or a message could expire "
                   f"between two heartbeats (heartbeat_interval {self.heartbeat_interval:g} s, "
                   f"extension_threshold {self.extension_threshold:g} s)")
        if self.fifo is None:  # SQS requires the suffix on every FIFO queue name
            object.__setattr__(self, "fifo", self.queue_url.endswith(".fifo"))

    def _derive_heartbeat(self) -> None:
        """Fill in what was not given, from the visibility timeout; what was given is kept, and checked."""
        threshold = self.extension_threshold
        if threshold is None:
            threshold = min(DEFAULT_EXTENSION_THRESHOLD, self.visibility_timeout / 2)
        object.__setattr__(self, "extension_threshold", float(threshold))
        interval = self.heartbeat_interval
        if interval is DERIVED:
            interval = min(DEFAULT_HEARTBEAT_INTERVAL, threshold / 2)
        object.__setattr__(self, "heartbeat_interval", float(interval) if interval else None)

    @property
    def heartbeat_on(self) -> bool:
        return bool(self.heartbeat_interval)

    @property
    def is_fifo(self) -> bool:
        return bool(self.fifo)

    @property
    def capacity(self) -> int:
        """Messages held at once: running, plus prefetched waiting for a slot."""
        return self.max_concurrency + self.prefetch

    def receive_kwargs(self) -> dict[str, object]:
        """ReceiveMessage's parameters, but for MaxNumberOfMessages (which depends on free room)."""
        system = list(self.system_attribute_names)
        if "All" not in system:  # the worker itself needs these two
            system += [n for n in ("ApproximateReceiveCount", "MessageGroupId") if n not in system]
        return {"QueueUrl": self.queue_url, "VisibilityTimeout": self.visibility_timeout,
                "WaitTimeSeconds": self.wait_time_seconds, "MessageSystemAttributeNames": system,
                "MessageAttributeNames": list(self.message_attribute_names)}


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)
