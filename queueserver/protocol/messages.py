"""Message validation and SQS's MD5 digests, exactly as SQS computes them."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from decimal import Decimal
from typing import Any

from queueserver import errors, limits
from queueserver.models import StoredMessage

# XML 1.0's character set: everything else is InvalidMessageContents.
_INVALID_CHARACTER = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Letters and digits of any script (SQS takes `attr.1øßä`), `_`, `-` and `.`; fullmatch: "$" lets "\n" by.
_ATTRIBUTE_NAME = re.compile(r"[\w.\-]+")
_DATA_TYPE = re.compile(r"(String|Number|Binary)(\..+)?")
_ALLOWED_SET = "#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"


def first_invalid_character(text: str) -> str | None:
    match = _INVALID_CHARACTER.search(text)
    return None if match is None else match.group()


def check_body(body: Any) -> int:
    """Validate a MessageBody; returns its size in bytes."""
    if body is None or body == "":
        raise errors.MissingParameter("The request must contain the parameter MessageBody.")
    if not isinstance(body, str):
        raise errors.InvalidParameterValue("The parameter MessageBody must be a string.")
    if body.isascii() and body.isprintable():  # the usual body: nothing to search for, a byte a character
        return len(body)
    bad = first_invalid_character(body)
    if bad is not None:
        raise errors.InvalidMessageContents(
            f"Invalid binary character '#x{ord(bad):X}' was found in the message body, "
            f"the set of allowed characters is {_ALLOWED_SET}"
        )
    return len(body.encode("utf-8"))


def md5_of_body(body: str) -> str:
    return hashlib.md5(body.encode("utf-8")).hexdigest()


def check_message_attributes(attributes: Any, *, system: bool = False) -> int:
    """Validate MessageAttributes (or MessageSystemAttributes); returns their size in bytes."""
    if attributes is None:
        return 0
    if not isinstance(attributes, dict):
        raise errors.InvalidParameterValue("The message attributes must be a map.")
    if len(attributes) > limits.MAX_MESSAGE_ATTRIBUTES:
        raise errors.InvalidParameterValue(
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{limits.MAX_MESSAGE_ATTRIBUTES}]."
        )
    size = 0
    for name, value in attributes.items():
        if system:
            _check_system_attribute(name, value)
        else:
            _check_attribute_name(name)
        size += len(name.encode("utf-8")) + _check_attribute_value(name, value)
    return size


def _check_system_attribute(name: str, value: Any) -> None:
    if name != "AWSTraceHeader":
        raise errors.InvalidParameterValue(
            f"Message system attribute name '{name}' is invalid."
        )
    if not isinstance(value, dict) or value.get("DataType") != "String":
        raise errors.InvalidParameterValue(
            "The message system attribute 'AWSTraceHeader' must be of type String."
        )


def _check_attribute_name(name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise errors.InvalidParameterValue("The request must contain non-empty message attribute name.")
    lowered = name.lower()
    reason = None
    if len(name) > limits.MAX_ATTRIBUTE_NAME_LENGTH:
        reason = f"Message attribute name '{name}' must be at most {limits.MAX_ATTRIBUTE_NAME_LENGTH} characters."
    elif lowered.startswith("aws.") or lowered.startswith("amazon."):
        reason = f"You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These strings are reserved for internal use. Invalid name: {name}"
    elif not _ATTRIBUTE_NAME.fullmatch(name) or name.startswith(".") or name.endswith(".") or ".." in name:
        reason = (f"Message attribute name '{name}' is invalid. Names can contain only alphanumeric "
                  "characters, hyphens, underscores and periods, may not start or end with a period, "
                  "and may not contain two periods in a row.")
    if reason:
        raise errors.InvalidParameterValue(reason)


def _check_attribute_value(name: str, value: Any) -> int:
    """Validate one attribute's value; returns the bytes it adds to the message size."""
    if not isinstance(value, dict):
        raise errors.InvalidParameterValue(f"The message attribute '{name}' must contain non-empty message attribute value.")
    data_type = value.get("DataType")
    if not data_type:
        raise errors.InvalidParameterValue(f"The message attribute '{name}' must contain non-empty message attribute type.")
    if (not isinstance(data_type, str) or not _DATA_TYPE.fullmatch(data_type)
            or len(data_type) > limits.MAX_ATTRIBUTE_TYPE_LENGTH or first_invalid_character(data_type) is not None):
        raise errors.InvalidParameterValue(
            f"The message attribute '{name}' has an invalid message attribute type, the set of supported "
            "type prefixes is Binary, Number, and String."
        )
    if value.get("StringListValues") or value.get("BinaryListValues"):
        raise errors.UnsupportedOperation("Message attribute list values in SendMessage operation are not supported.")
    size = len(data_type.encode("utf-8"))
    if data_type.startswith("Binary"):
        raw = value.get("BinaryValue")
        if not raw:
            raise _empty_value(name, data_type)
        return size + len(binary_value(raw))
    text = value.get("StringValue")
    if text is None or text == "":
        raise _empty_value(name, data_type)
    if not isinstance(text, str):
        raise errors.InvalidParameterValue(f"The message attribute '{name}' has an invalid StringValue.")
    bad = first_invalid_character(text)
    if bad is not None:
        raise errors.InvalidParameterValue(
            f"Invalid binary character '#x{ord(bad):X}' was found in the message attribute '{name}' value, "
            f"the set of allowed characters is {_ALLOWED_SET}"
        )
    if data_type.startswith("Number"):
        _check_number(name, text)
    return size + len(text.encode("utf-8"))


def _empty_value(name: str, data_type: str) -> errors.InvalidParameterValue:
    base_type = data_type.partition(".")[0]
    return errors.InvalidParameterValue(
        f"Message (user) attribute '{name}' must contain a non-empty value of type '{base_type}'.")


def _check_number(name: str, text: str) -> None:
    try:
        number = Decimal(text.strip())
        valid = number.is_finite()
        if valid and number != 0:
            exponent = number.adjusted()  # before normalize(), which overflows on 1e999999999999
            valid = -128 <= exponent <= 126 and len(number.normalize().as_tuple().digits) <= 38
    except ArithmeticError:  # InvalidOperation, Overflow
        valid = False
    if not valid:
        raise errors.InvalidParameterValue(
            f"Can't cast the value of message (user) attribute '{name}' to a number."
        )


def binary_value(raw: Any) -> bytes:
    """A BinaryValue as bytes: JSON carries base64 text."""
    if isinstance(raw, bytes):
        return raw
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise errors.InvalidParameterValue("The BinaryValue of a message attribute is not valid base64.")


def md5_of_attributes(attributes: dict[str, dict[str, Any]]) -> str:
    """SQS's MD5OfMessageAttributes: length-prefixed name, type, transport byte, value; sorted by name."""
    digest = hashlib.md5()
    for name in sorted(attributes):
        value = attributes[name]
        data_type = value["DataType"]
        _put(digest, name.encode("utf-8"))
        _put(digest, data_type.encode("utf-8"))
        if data_type.startswith("Binary"):
            digest.update(b"\x02")
            _put(digest, binary_value(value["BinaryValue"]))
        else:
            digest.update(b"\x01")
            _put(digest, value["StringValue"].encode("utf-8"))
    return digest.hexdigest()


def _put(digest: Any, data: bytes) -> None:
    digest.update(struct.pack(">I", len(data)))
    digest.update(data)


def stored_attributes(attributes: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The attributes as kept and returned: only DataType and one value, binary as base64."""
    kept: dict[str, dict[str, str]] = {}
    for name, value in attributes.items():
        data_type = value["DataType"]
        if data_type.startswith("Binary"):
            kept[name] = {"DataType": data_type,
                          "BinaryValue": base64.b64encode(binary_value(value["BinaryValue"])).decode("ascii")}
        else:
            kept[name] = {"DataType": data_type, "StringValue": value["StringValue"]}
    return kept


def select_attributes(attributes: dict[str, dict[str, str]] | None, names: list[str]) -> dict[str, dict[str, str]]:
    """The attributes a receive asked for: names, `All`, `.*`, `*`, or `prefix.*`, which takes every
    name that starts with the prefix (SQS: `Hel.*` returns `Hello` and `Help.Me`)."""
    if not attributes or not names:
        return {}
    wanted = set(names)
    if "All" in wanted or ".*" in wanted or "*" in wanted:
        return dict(attributes)
    prefixes = tuple(n[:-2] for n in names if n.endswith(".*"))
    return {name: value for name, value in attributes.items()
            if name in wanted or (prefixes and name.startswith(prefixes))}


def system_attributes(m: StoredMessage) -> dict[str, str]:
    """A received or browsed message's system attributes by their SQS names: those it has, as SQS strings."""
    available = {
        "SenderId": m.sender_id,
        "SentTimestamp": str(m.sent_at_ms),
        "ApproximateReceiveCount": str(m.receive_count),
        "ApproximateFirstReceiveTimestamp": None if m.first_received_at_ms is None else str(m.first_received_at_ms),
        "AWSTraceHeader": m.trace_header,
        "MessageGroupId": m.group_id,
        "MessageDeduplicationId": m.deduplication_id,
        "SequenceNumber": m.sequence_number,
        "DeadLetterQueueSourceArn": m.dead_letter_source_arn,
    }
    return {name: value for name, value in available.items() if value is not None}


def add_message_attributes(result: dict[str, Any], m: StoredMessage, names: list[str]) -> None:
    """Add the message attributes asked for, and their digest, to a received or browsed message's answer."""
    selected = select_attributes(m.attributes, names)
    if selected:
        result["MD5OfMessageAttributes"] = md5_of_attributes(selected)
        result["MessageAttributes"] = selected
