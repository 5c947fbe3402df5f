"""The data source's options, parsed once into frozen values that pickle with readers and writers.

Spark hands options over as strings with lower-cased keys; a mistyped number or an
unknown mode must fail at `load()`/`save()` with the option's name in the message,
not deep inside an executor task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from queueserver.limits import MAX_VISIBILITY_TIMEOUT_SECONDS, MAX_WAIT_TIME_SECONDS
from queueserver.spark.connection import Connection, get_option

BROWSE = "browse"
RECEIVE = "receive"


def _int(options: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = get_option(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise ValueError(f"option {name} must be {low}..{high}, not {value}")
    return value


def _float(options: Mapping[str, str], name: str, default: float) -> float:
    raw = get_option(options, name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"option {name} must be a number, not {raw!r}") from None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = get_option(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name} must be true or false, not {raw!r}")


@dataclass(frozen=True)
class ReadSettings:
    """What the readers need. See docs/spark.md for each option."""

    connection: Connection
    visibility_timeout: int = 30
    heartbeat_interval: float = 10.0  # 0: off
    max_messages_per_batch: int = 1000
    num_partitions: int = 2
    max_messages_per_partition: int = 1000
    wait_time_seconds: int = 1
    mode: str = BROWSE
    max_messages: int = 0  # browse: 0 = the whole queue
    release_on_stop: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ReadSettings:
        visibility = _int(options, "visibilityTimeout", 30, 1, MAX_VISIBILITY_TIMEOUT_SECONDS)
        heartbeat = _float(options, "heartbeatInterval", visibility / 3)
        if heartbeat < 0 or (heartbeat and heartbeat >= visibility):
            raise ValueError(f"option heartbeatInterval must be 0 (off) or below visibilityTimeout "
                             f"({visibility} s), not {heartbeat}")
        mode = (get_option(options, "mode") or BROWSE).lower()
        if mode not in (BROWSE, RECEIVE):
            raise ValueError(f"option mode must be '{BROWSE}' (non-destructive, queueserver only) or "
                             f"'{RECEIVE}' (receives with a visibility timeout; pair it with consume()), not {mode!r}")
        return cls(
            connection=Connection.from_options(options),
            visibility_timeout=visibility,
            heartbeat_interval=heartbeat,
            max_messages_per_batch=_int(options, "maxMessagesPerBatch", 1000, 1, 1_000_000),
            num_partitions=_int(options, "numPartitions", 2, 1, 10_000),
            max_messages_per_partition=_int(options, "maxMessagesPerPartition", 1000, 1, 10_000_000),
            wait_time_seconds=_int(options, "waitTimeSeconds", 1, 0, MAX_WAIT_TIME_SECONDS),
            mode=mode,
            max_messages=_int(options, "maxMessages", 0, 0, 1_000_000_000),
            release_on_stop=_bool(options, "releaseOnStop", False),
        )


@dataclass(frozen=True)
class WriteSettings:
    """Which columns make a message. Without a body column, each row is sent as JSON."""

    connection: Connection
    body_column: str = "body"
    attributes_column: str | None = None
    group_id_column: str | None = None
    deduplication_id_column: str | None = None
    delay_seconds_column: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> WriteSettings:
        return cls(
            connection=Connection.from_options(options),
            body_column=get_option(options, "bodyColumn") or "body",
            attributes_column=get_option(options, "attributesColumn"),
            group_id_column=get_option(options, "groupIdColumn"),
            deduplication_id_column=get_option(options, "deduplicationIdColumn"),
            delay_seconds_column=get_option(options, "delaySecondsColumn"),
        )
