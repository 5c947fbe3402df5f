"""The rows the readers produce: one fixed schema, and the conversion from an SQS message.

Why one schema for every read mode: a DataFrame read by a stream, by a receive or by a
browse can then be unioned and handled by the same code. Columns a mode cannot fill are
null: `receipt_handle` only exists for mode "receive" (whose caller may delete), and
`state` only says something for a browse (a received message is always in flight).

Message attributes become a map of strings: String and Number values as SQS sends them,
Binary values base64-encoded (their type is lost; the writer sends every attribute as a
String). System attributes that have no column of their own stay in `system_attributes`.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any

SCHEMA = (
    "message_id string not null, body string, attributes map<string,string>, "
    "system_attributes map<string,string>, receive_count int, sent_timestamp timestamp, "
    "first_receive_timestamp timestamp, message_group_id string, message_deduplication_id string, "
    "sequence_number string, dead_letter_source_arn string, queue string, state string, receipt_handle string"
)
# The system attributes every read asks for (a stream needs the FIFO ones to partition by group).
SYSTEM_ATTRIBUTE_NAMES = ["All"]

Row = tuple[Any, ...]


def message_row(message: Mapping[str, Any], queue_url: str, *, state: str | None = None,
                receipt_handle: str | None = None) -> Row:
    """The row for one message as boto3's receive_message (or the browse extension) returns it."""
    system: Mapping[str, str] = message.get("Attributes") or {}
    return (
        str(message["MessageId"]),
        message.get("Body"),
        message_attributes(message.get("MessageAttributes") or {}),
        dict(system),
        _int(system.get("ApproximateReceiveCount")),
        _timestamp(system.get("SentTimestamp")),
        _timestamp(system.get("ApproximateFirstReceiveTimestamp")),
        system.get("MessageGroupId"),
        system.get("MessageDeduplicationId"),
        system.get("SequenceNumber"),
        system.get("DeadLetterQueueSourceArn"),
        queue_url,
        state,
        receipt_handle,
    )


def message_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, attribute in attributes.items():
        if "StringValue" in attribute:
            values[name] = str(attribute["StringValue"])
        elif "BinaryValue" in attribute:
            raw = attribute["BinaryValue"]
            values[name] = raw if isinstance(raw, str) else base64.b64encode(raw).decode("ascii")
    return values


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _timestamp(epoch_ms: str | None) -> dt.datetime | None:
    if not epoch_ms:
        return None
    try:
        return dt.datetime.fromtimestamp(int(epoch_ms) / 1000, tz=dt.UTC)
    except (ValueError, OverflowError):
        return None


GROUP_INDEX = 7  # message_group_id's position in a row
SEQUENCE_INDEX = 9  # sequence_number's position
