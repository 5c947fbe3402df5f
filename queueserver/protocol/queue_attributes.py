"""Queue attributes: which exist, their defaults, and how their values are checked."""

from __future__ import annotations

from typing import Callable

from queueserver import errors, limits
from queueserver.auth.policy import parse_policy
from queueserver.errors import PolicyError
from queueserver.client_text import json_document
from queueserver.protocol.messages import first_invalid_character

# Attributes a client may set, with the check that normalises each value.
Checker = Callable[[str, str], str]


def _integer(low: int, high: int) -> Checker:
    def check(name: str, value: str) -> str:
        try:
            number = int(value.strip())
        except (ValueError, AttributeError):
            raise _bad(name) from None
        if not low <= number <= high:
            raise _bad(name)
        return str(number)

    return check


def _boolean(name: str, value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise _bad(name)
    return lowered


def _choice(*choices: str) -> Checker:
    def check(name: str, value: str) -> str:
        if value not in choices:
            raise _bad(name)
        return value

    return check


def _policy(name: str, value: str) -> str:
    """A policy document the evaluator reads whole: one using anything it does not implement is refused,
    never stored to be half-understood (a Deny beside it would be lost). AddPermission and RemovePermission
    change its Statement."""
    if value == "":
        return value
    if policy_statements(json_document(value)) is None:
        raise _bad(name)
    try:
        parse_policy(value, resource_policy=True)
    except PolicyError:
        raise _bad(name) from None
    return value


def policy_statements(policy: object) -> list[dict] | None:
    """The statements of a parsed Policy (absent: none), or None if it is not a policy document."""
    if not isinstance(policy, dict):
        return None
    statements = policy.get("Statement", [])
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list) or not all(isinstance(s, dict) for s in statements):
        return None
    return statements


def _any_string(name: str, value: str) -> str:
    return value


def _check_text(name: str, value: str) -> None:
    """Nothing is stored that an answer could not carry back, nor more than a stated size."""
    cap = limits.MAX_POLICY_BYTES if name in _JSON_DOCUMENTS else limits.MAX_ATTRIBUTE_VALUE_LENGTH
    if len(value) > cap or (name in _JSON_DOCUMENTS and len(value.encode("utf-8", "replace")) > cap):
        raise errors.InvalidAttributeValue(f"Invalid value for the parameter {name}. Reason: "
                                           f"longer than {cap} {'bytes' if name in _JSON_DOCUMENTS else 'characters'}.")
    if first_invalid_character(value) is not None:
        raise errors.InvalidAttributeValue(f"Invalid value for the parameter {name}. Reason: "
                                           "only XML 1.0 characters are allowed.")


_JSON_DOCUMENTS = frozenset({"Policy", "RedrivePolicy", "RedriveAllowPolicy"})


def _bad(name: str) -> errors.InvalidAttributeValue:
    return errors.InvalidAttributeValue(f"Invalid value for the parameter {name}.")


SETTABLE: dict[str, Checker] = {
    "DelaySeconds": _integer(0, limits.MAX_DELAY_SECONDS),
    "MaximumMessageSize": _integer(limits.MIN_MESSAGE_SIZE_LIMIT, limits.MAX_MESSAGE_SIZE),
    "MessageRetentionPeriod": _integer(limits.MIN_RETENTION_SECONDS, limits.MAX_RETENTION_SECONDS),
    "ReceiveMessageWaitTimeSeconds": _integer(0, limits.MAX_WAIT_TIME_SECONDS),
    "VisibilityTimeout": _integer(0, limits.MAX_VISIBILITY_TIMEOUT_SECONDS),
    "Policy": _policy,
    "RedrivePolicy": _any_string,  # checked against the queues in redrive_policy.py
    "RedriveAllowPolicy": _any_string,
    "KmsMasterKeyId": _any_string,
    "KmsDataKeyReusePeriodSeconds": _integer(60, 86_400),
    "SqsManagedSseEnabled": _boolean,
}
FIFO_ONLY: dict[str, Checker] = {
    "ContentBasedDeduplication": _boolean,
    "DeduplicationScope": _choice("messageGroup", "queue"),
    "FifoThroughputLimit": _choice("perQueue", "perMessageGroupId"),
}
COMPUTED = (
    "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn",
)
READABLE = frozenset(SETTABLE) | frozenset(FIFO_ONLY) | frozenset(COMPUTED) | {"FifoQueue"}

DEFAULTS = {
    "DelaySeconds": "0",
    "MaximumMessageSize": str(limits.MAX_MESSAGE_SIZE),
    "MessageRetentionPeriod": str(limits.DEFAULT_RETENTION_SECONDS),
    "ReceiveMessageWaitTimeSeconds": "0",
    "VisibilityTimeout": str(limits.DEFAULT_VISIBILITY_TIMEOUT),
    "SqsManagedSseEnabled": "true",
}
FIFO_DEFAULTS = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
KMS_DATA_KEY_REUSE_DEFAULT = "300"
# Attributes that vanish when set to "" (SQS removes them).
REMOVABLE = ("Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId")


def unknown(name: str) -> errors.InvalidAttributeName:
    return errors.InvalidAttributeName(f"Unknown Attribute {name}.")


def check(attributes: dict[str, str], *, fifo: bool, creating: bool) -> dict[str, str]:
    """Validate and normalise attributes for CreateQueue or SetQueueAttributes."""
    checked: dict[str, str] = {}
    for name, value in attributes.items():
        if not isinstance(value, str):
            raise _bad(name)
        _check_text(name, value)
        if name == "FifoQueue":
            checked[name] = _check_fifo_queue(value, fifo=fifo)
            continue
        checker = SETTABLE.get(name) or (FIFO_ONLY.get(name) if fifo else None)
        if checker is None and name in _FIFO_SETTINGS:
            raise errors.InvalidAttributeName(f"You can specify the {name} only when FifoQueue is set to true.")
        if checker is None:
            raise unknown(name)
        checked[name] = checker(name, value)
    if creating:
        check_combination({**(FIFO_DEFAULTS if fifo else {}), **checked})
    return checked


# The FIFO-only attributes whose refusal on a standard queue AWS words as a FIFO rule, not as unknown.
_FIFO_SETTINGS = ("DeduplicationScope", "FifoThroughputLimit")


def _check_fifo_queue(value: str, *, fifo: bool) -> str:
    """A standard queue has no FifoQueue attribute, not even "false"; a FIFO queue's stays "true"."""
    value = _boolean("FifoQueue", value)
    if not fifo:
        raise unknown("FifoQueue")
    if value != "true":
        raise errors.InvalidAttributeValue(
            "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.")
    return value


def check_combination(attributes: dict[str, str]) -> None:
    """Rules between attributes, checked on the queue's attributes as they would become."""
    if (attributes.get("FifoThroughputLimit") == "perMessageGroupId"
            and attributes.get("DeduplicationScope") == "queue"):
        raise errors.InvalidAttributeValue(
            "Invalid value for the parameter FifoThroughputLimit. Reason: "
            "perMessageGroupId is allowed only when DeduplicationScope is messageGroup."
        )
    if attributes.get("KmsMasterKeyId") and attributes.get("SqsManagedSseEnabled") == "true":
        raise errors.InvalidAttributeValue(
            "Invalid value for the parameter SqsManagedSseEnabled. Reason: "
            "You can use one type of server-side encryption (SSE) at one time."
        )


def apply(current: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    """The attributes after SetQueueAttributes: "" removes the removable ones."""
    updated = dict(current)
    for name, value in changes.items():
        if name in REMOVABLE and value == "":
            updated.pop(name, None)
        else:
            updated[name] = value
    if changes.get("KmsMasterKeyId") and "SqsManagedSseEnabled" not in changes:
        updated["SqsManagedSseEnabled"] = "false"
    if changes.get("SqsManagedSseEnabled") == "true" and "KmsMasterKeyId" not in changes:
        updated.pop("KmsMasterKeyId", None)
    if updated.get("KmsMasterKeyId"):  # the data key period belongs to KMS encryption, and comes with it
        updated.setdefault("KmsDataKeyReusePeriodSeconds", KMS_DATA_KEY_REUSE_DEFAULT)
    else:
        updated.pop("KmsDataKeyReusePeriodSeconds", None)
    check_combination(updated)
    return updated
