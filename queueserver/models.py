"""Records passed between the layers.

The queue is frozen; the records made per message or per request are plain slotted
dataclasses, because a frozen one's __init__ costs four times as much (one
object.__setattr__ per field) and a batch makes dozens of them.
"""

from __future__ import annotations

import json
import operator
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, Protocol

from queueserver import limits


# A subscription is stored as a queue named `<queue>~<subscription>`: no queue name can contain "~".
SUBSCRIPTION_SEPARATOR = "~"


class Caller(Protocol):
    """The client a long poll answers, as storage sees it: whether it has hung up (protocol/ passes
    its connection, client_connection.ClientConnection; storage knows nothing of HTTP)."""

    def gone(self) -> bool: ...

    async def hung_up(self) -> None: ...


class _IntAttribute:
    """A queue attribute read as an int, parsed on first use and then kept in the Queue's own dict
    (like cached_property: a non-data descriptor, so later reads are plain attribute reads)."""

    def __init__(self, attribute: str, default: int) -> None:
        self._attribute = attribute
        self._default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, queue: Any, owner: type | None = None) -> Any:
        if queue is None:
            return self
        text = queue.attributes.get(self._attribute)
        value = queue.__dict__[self._name] = self._default if text is None else int(text)
        return value


@dataclass(frozen=True)
class Queue:
    """A queue as stored; `attributes` holds the settable attributes as SQS strings.

    Immutable and replaced whole on every change, so the values read from `attributes`
    on every request are parsed once per Queue (cached_property).
    """

    id: int
    region: str
    account: str
    name: str
    fifo: bool
    attributes: dict[str, str]
    tags: dict[str, str]
    created_at_ms: int
    modified_at_ms: int
    # The scope deduplication keeps: the queue's DeduplicationScope at creation. SQS reports a later
    # change of the attribute but goes on deduplicating as before.
    deduplication_scope: str = "queue"

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account}:{self.name}"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.region, self.account, self.name)

    @property
    def subscribed_to(self) -> str | None:
        """The name of the queue this subscription receives from; None for a queue."""
        if SUBSCRIPTION_SEPARATOR not in self.name:  # asked on every send
            return None
        parent, separator, _ = self.name.partition(SUBSCRIPTION_SEPARATOR)
        return parent if separator else None

    visibility_timeout = _IntAttribute("VisibilityTimeout", limits.DEFAULT_VISIBILITY_TIMEOUT)
    delay_seconds = _IntAttribute("DelaySeconds", 0)
    retention_seconds = _IntAttribute("MessageRetentionPeriod", limits.DEFAULT_RETENTION_SECONDS)
    maximum_message_size = _IntAttribute("MaximumMessageSize", limits.MAX_MESSAGE_SIZE)
    receive_wait_seconds = _IntAttribute("ReceiveMessageWaitTimeSeconds", 0)

    @cached_property
    def redrive_policy(self) -> tuple[str, int] | None:
        """(deadLetterTargetArn, maxReceiveCount), if the queue has a dead-letter queue."""
        text = self.attributes.get("RedrivePolicy")
        if not text:
            return None
        policy = json.loads(text)
        return policy["deadLetterTargetArn"], int(policy["maxReceiveCount"])

    @property
    def deduplication_per_group(self) -> bool:
        return self.deduplication_scope == "messageGroup"

    @property
    def content_based_deduplication(self) -> bool:
        return self.attributes.get("ContentBasedDeduplication") == "true"


def parse_arn(arn: str) -> tuple[str, str, str] | None:
    """(region, account, name) of an SQS queue ARN, or None if it is not one."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not all(parts[3:]):
        return None
    return parts[3], parts[4], parts[5]


@dataclass(slots=True)
class NewMessage:
    """A validated message ready to store; attributes are in their JSON wire shape."""

    body: str
    md5_of_body: str
    delay_seconds: int
    attributes: dict[str, dict[str, Any]] | None = None
    md5_of_attributes: str | None = None
    trace_header: str | None = None
    md5_of_system_attributes: str | None = None
    group_id: str | None = None
    deduplication_id: str | None = None
    size: int = 0  # body and message attributes, as SQS counts them (the SentMessageSize metric)


@dataclass(slots=True)
class SentMessage:
    message_id: str
    md5_of_body: str
    md5_of_attributes: str | None
    md5_of_system_attributes: str | None
    sequence_number: str | None = None


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def uuid4_string(rng: random.Random) -> str:
    """A random (version 4, RFC 4122 variant) UUID in its text form, in a fifth of the time
    str(uuid.uuid4()) takes: MessageIds and request ids are made per message."""
    h = rng.randbytes(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def sequence_number(row_id: int) -> str:
    """A FIFO SequenceNumber: the message's row, which only grows, as SQS's 20-digit decimal."""
    return f"{row_id:020d}"


@dataclass(slots=True)
class StoredMessage:
    """What is stored about a message, as received or browsed: the fields of its system attributes.
    Every field is given, positionally in this order (keywords cost more, and this is made per message)."""

    message_id: str
    body: str
    md5_of_body: str
    attributes: dict[str, dict[str, Any]] | None
    sent_at_ms: int
    sender_id: str
    receive_count: int
    first_received_at_ms: int | None  # None: never received
    trace_header: str | None
    group_id: str | None
    deduplication_id: str | None
    sequence_number: str | None
    dead_letter_source_arn: str | None


@dataclass(slots=True)
class ReceivedMessage(StoredMessage):
    receipt_handle: str


class Delivery(NamedTuple):
    """A received message as a receive that asks for no attributes answers it (most do): the four fields
    of its answer, read and built without the other dozen."""

    message_id: str
    receipt_handle: str
    md5_of_body: str
    body: str


@dataclass(frozen=True)
class QueueCounts:
    visible: int
    in_flight: int
    delayed: int
    # When the oldest unexpired message (in any state) was enqueued; None: empty. Not one of the counts.
    oldest_enqueued_at_ms: int | None = field(default=None, compare=False)


@dataclass(slots=True)
class VisibilityChange:
    receipt_handle: str
    visibility_timeout: int


@dataclass(frozen=True, slots=True)
class EntryOutcome:
    """One entry of a batch operation: done, or the error it failed with."""

    error: Exception | None = None


DONE = EntryOutcome()  # every entry that succeeded shares it (frozen): no object per entry


@dataclass(frozen=True)
class MoveTask:
    handle: str
    status: str
    source_arn: str
    destination_arn: str | None
    rate: int | None
    moved: int
    to_move: int
    failure_reason: str | None
    started_at_ms: int


@dataclass(slots=True)
class BrowsedMessage(StoredMessage):
    """A message seen without receiving it (the browse extension): no receipt handle, no count change."""

    position: int  # its place in the queue; browsing resumes after it
    state: str  # "visible", "in_flight" or "delayed"


_BODY = operator.attrgetter("body")


def messages_within_answer(messages: list[Any]) -> int:
    """How many of MESSAGES (StoredMessages or Deliveries), in order, one answer carries: those whose
    bodies and attribute values fit in limits.MAX_ANSWER_BYTES, and the first whatever its size."""
    count = len(messages)
    if count * limits.MAX_MESSAGE_SIZE <= limits.MAX_ANSWER_BYTES:  # eight or fewer: they fit whatever they hold
        return count
    with_attributes = isinstance(messages[0], StoredMessage)  # a Delivery has none
    if not with_attributes and sum(map(len, map(_BODY, messages))) <= limits.MAX_ANSWER_BYTES:
        return count  # the common case, summed without a Python step per message
    total = 0
    for kept, message in enumerate(messages):
        total += len(message.body)
        if with_attributes and message.attributes:
            total += sum(len(name) + sum(len(v) for v in value.values() if isinstance(v, (str, bytes)))
                         for name, value in message.attributes.items())
        if total > limits.MAX_ANSWER_BYTES and kept:
            return kept
    return count


@dataclass(frozen=True, slots=True)
class Topic:
    """An SNS topic as stored; `attributes` holds the settable ones as SNS strings."""

    id: int
    region: str
    account: str
    name: str
    fifo: bool
    attributes: dict[str, str]
    tags: dict[str, str]

    @property
    def arn(self) -> str:
        return f"arn:aws:sns:{self.region}:{self.account}:{self.name}"


@dataclass(frozen=True, slots=True)
class TopicSubscription:
    """A topic's subscription: `endpoint` a queue ARN (protocol sqs); `attributes` the settable ones."""

    id: int
    topic_id: int
    arn: str
    protocol: str
    endpoint: str
    owner: str
    principal: str
    attributes: dict[str, str]


@dataclass(slots=True)
class Publication:
    """One message published to a topic, validated, before the topic's subscriptions see it."""

    message_id: str
    group_id: str | None = None
    deduplication_id: str | None = None
    size: int = 0


@dataclass(frozen=True, slots=True)
class FilteredOut:
    """A publication a subscription's filter policy turned away, and why: the suffix of CloudWatch's
    NumberOfNotificationsFilteredOut-<reason> (MessageAttributes, MessageBody, NoMessageAttributes,
    InvalidAttributes, InvalidMessageBody)."""

    reason: str


@dataclass(slots=True)
class Published:
    """What a publish answers per message, and what its subscriptions did with it."""

    message_id: str
    sequence_number: str | None = None
    delivered: int = 0
    filtered_out: list[str] = field(default_factory=list)  # a reason per subscription that turned it away
    failed: int = 0
    redriven: int = 0  # failed deliveries stored in the subscription's dead-letter queue
    not_redriven: int = 0  # failed deliveries whose dead-letter queue would not take them either
