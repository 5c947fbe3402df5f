"""AWS Query/XML: form or query-string parameters in, SQS's XML out.

`decode` turns the flattened Query parameters (`Attribute.1.Name`, `MessageAttribute.2.Value.StringValue`,
`SendMessageBatchRequestEntry.3.Id`, ...) into exactly the JSON request shape the handlers take, so a
handler never knows which protocol came in; scalars stay strings (`params.integer` accepts numeric
strings) and a `BinaryValue` stays base64 text, as on the JSON path. `encode` turns a handler's result
into the element names and shapes of the SQS Query model (botocore < 1.31.81, protocol "query"):
flattened lists, `<Attribute><Name/><Value/></Attribute>` maps, `<{Action}Result>` wrappers.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

from queueserver import errors
from queueserver.protocol.error_codes import WireError

CONTENT_TYPE = "text/xml"
NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'

# -- decode ----------------------------------------------------------------------

# Parameters about the request itself (signing, API version), never handler members.
_ENVELOPE = frozenset({"Action", "Version", "AWSAccessKeyId", "Signature", "SignatureMethod",
                       "SignatureVersion", "Timestamp", "Expires", "SecurityToken"})

# `Item.N` → JSON list member. The model's flattened item name first, the member name as an alias.
_LISTS = {
    "AttributeName": "AttributeNames",
    "MessageAttributeName": "MessageAttributeNames",
    "MessageSystemAttributeName": "MessageSystemAttributeNames",
    "TagKey": "TagKeys",
    "AWSAccountId": "AWSAccountIds",
    "ActionName": "Actions",
    "StringListValue": "StringListValues",
    "BinaryListValue": "BinaryListValues",
}
_LIST_ITEMS_SENT = frozenset(_LISTS)
_LISTS.update({member: member for member in list(_LISTS.values())})

# `Entry.N.Member` → the JSON `Entries` list of structures.
_ENTRIES = frozenset({"SendMessageBatchRequestEntry", "DeleteMessageBatchRequestEntry",
                      "ChangeMessageVisibilityBatchRequestEntry", "Entries"})


class _Map(NamedTuple):
    """A flattened map: `Head.N.<key>` and `Head.N.<value>` (the value a structure or a string)."""

    member: str
    key: str
    value: str
    structured: bool


_MAPS = {
    "Attribute": _Map("Attributes", "Name", "Value", False),
    "Tag": _Map("Tags", "Key", "Value", False),
    "MessageAttribute": _Map("MessageAttributes", "Name", "Value", True),
    "MessageSystemAttribute": _Map("MessageSystemAttributes", "Name", "Value", True),
}
_MAPS.update({m.member: m for m in list(_MAPS.values())})

# A list sent empty: botocore's query serializer writes `AttributeNames=` (or `Entries=`); a map alike.
_EMPTY = {**{member: list for member in _LISTS.values()}, "Entries": list,
          **{shape.member: dict for shape in _MAPS.values()}}


def request_fields(query_string: str, body: bytes, content_type: str) -> dict[str, str]:
    """The Query parameters of a request: the URL's query string, then a form body over it."""
    fields = _parse(query_string) if query_string else {}
    media_type = content_type.partition(";")[0].strip().lower()
    if body and media_type in ("", "application/x-www-form-urlencoded"):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise errors.SerializationError("The request body is not valid UTF-8 form data.") from None
        fields.update(_parse(text))
    return fields


def _parse(text: str) -> dict[str, str]:
    # surrogatepass: a percent-encoded lone surrogate reaches the handlers, which reject it as
    # InvalidMessageContents exactly as they do a JSON "\ud800"; other invalid UTF-8 is malformed.
    try:
        return dict(parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="surrogatepass"))
    except (UnicodeDecodeError, ValueError):
        raise errors.SerializationError("The request parameters are not valid UTF-8 form data.") from None


def decode(fields: dict[str, str], action: str) -> dict[str, Any]:
    """The JSON-shaped request members of an action from its flattened Query parameters."""
    params = _structure(fields)
    if action == "CreateQueue" and "Tags" in params:
        params["tags"] = params.pop("Tags")  # CreateQueue's member is lower-case `tags` in JSON
    return params


# No SQS parameter name has more parts (`SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringListValue.1`
# has 7) nor an index of more digits; past these a name is malformed, not merely unknown.
MAX_NAME_PARTS = 12
MAX_INDEX_DIGITS = 9


def _structure(fields: dict[str, str]) -> dict[str, Any]:
    for name in fields:
        if name.count(".") >= MAX_NAME_PARTS:
            raise errors.SerializationError(f"The parameter name {name[:64]}... has too many parts.")
    return _members_of(fields)


def _members_of(fields: dict[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    # head -> index -> {rest of the name after `Head.N.`: value}
    groups: dict[str, dict[int, dict[str, str]]] = {}
    for name, value in fields.items():
        head, dot, rest = name.partition(".")
        if head in _LISTS or head in _ENTRIES or head in _MAPS:
            index, _, tail = rest.partition(".")
            if dot and index.isascii() and index.isdigit():
                if len(index) > MAX_INDEX_DIGITS:
                    raise errors.SerializationError(f"The index in the parameter {name[:64]} is too large.")
                groups.setdefault(head, {}).setdefault(int(index), {})[tail] = value
                continue
            if (dot and head in _MAPS) or (not dot and head in _LIST_ITEMS_SENT):
                # unnumbered, as older API versions wrote it: `Attribute.Name=…&Attribute.Value=…`,
                # `AttributeName=All`; it comes first
                groups.setdefault(head, {}).setdefault(0, {})[rest] = value
                continue
        if name in _ENVELOPE or name.startswith("X-Amz-"):
            continue
        result[name] = _EMPTY[name]() if value == "" and name in _EMPTY else value
    for head, items in groups.items():
        ordered = [items[i] for i in sorted(items)]
        if head in _LISTS:
            result[_LISTS[head]] = [item[""] for item in ordered if "" in item]
        elif head in _ENTRIES:
            result["Entries"] = [_members_of(item) for item in ordered]
        else:
            shape = _MAPS[head]
            mapping = result.setdefault(shape.member, {})
            if not isinstance(mapping, dict):
                mapping = result[shape.member] = {}
            for item in ordered:
                mapping[item.get(shape.key, "")] = _map_value(item, shape)
    return result


def _map_value(item: dict[str, str], shape: _Map) -> Any:
    if not shape.structured:
        return item.get(shape.value, "")
    prefix = shape.value + "."
    return _members_of({name[len(prefix):]: value for name, value in item.items() if name.startswith(prefix)})


# -- encode ----------------------------------------------------------------------

# Actions whose response has no <{Action}Result> element (the model gives them no output).
NO_RESULT = frozenset({"AddPermission", "ChangeMessageVisibility", "DeleteMessage", "DeleteQueue",
                        "PurgeQueue", "RemovePermission", "SetQueueAttributes", "TagQueue", "UntagQueue"})

# JSON list member → the element repeated for each item (flattened lists).
_LIST_ITEMS = {
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Failed": "BatchResultErrorEntry",
    "Results": "ListMessageMoveTasksResultEntry",
    "Subscriptions": "Subscription",
    "StringListValues": "StringListValue",
    "BinaryListValues": "BinaryListValue",
}

# JSON map member → (element repeated per entry, key element, value element).
_MAP_ITEMS = {
    "Attributes": ("Attribute", "Name", "Value"),
    "MessageAttributes": ("MessageAttribute", "Name", "Value"),
    "Tags": ("Tag", "Key", "Value"),
}

# The model's member order of a MessageAttributeValue.
_VALUE_ORDER = {"StringValue": 0, "BinaryValue": 1, "StringListValues": 2, "BinaryListValues": 3, "DataType": 4}

# XML 1.0 characters; anything else cannot appear in a document, even as a character reference.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#xD;"})


def escape(text: str) -> str:
    """Element text: markup escaped and CR as `&#xD;` (a parser turns a literal CR into LF).

    Bodies and attribute values are checked to be XML characters on the way in; anything else
    (say, an error message quoting a bad value) is replaced by U+FFFD so the document stays valid.
    """
    escaped = text.translate(_ESCAPES)
    return _NOT_XML.sub("\ufffd", escaped) if _NOT_XML.search(escaped) else escaped


def encode(action: str, result: dict[str, Any], request_id: str) -> bytes:
    out = [_DECLARATION, f'<{action}Response xmlns="{NAMESPACE}">']
    if action not in NO_RESULT:
        start = len(out)
        _members(out, action, result)
        if len(out) == start:
            out.append(f"<{action}Result/>")  # as AWS writes an empty result (a receive that found nothing)
        else:
            out.insert(start, f"<{action}Result>")
            out.append(f"</{action}Result>")
    out.append(f"<ResponseMetadata><RequestId>{escape(request_id)}</RequestId></ResponseMetadata>")
    out.append(f"</{action}Response>")
    return "".join(out).encode("utf-8")


def _members(out: list[str], action: str, members: dict[str, Any]) -> None:
    for name, value in members.items():
        if value is None:
            continue
        if name in _MAP_ITEMS and isinstance(value, dict):
            element, key, value_element = _MAP_ITEMS[name]
            for entry_key, entry_value in value.items():
                out.append(f"<{element}><{key}>{escape(str(entry_key))}</{key}>")
                if isinstance(entry_value, dict):
                    entry_value = dict(sorted(entry_value.items(), key=lambda kv: _VALUE_ORDER.get(kv[0], 9)))
                _element(out, action, value_element, entry_value)
                out.append(f"</{element}>")
        elif isinstance(value, list):
            item = f"{action}ResultEntry" if name == "Successful" else _LIST_ITEMS.get(name, name)
            for entry in value:
                _element(out, action, item, entry)
        else:
            _element(out, action, name, value)


def _element(out: list[str], action: str, name: str, value: Any) -> None:
    if isinstance(value, dict):
        out.append(f"<{name}>")
        _members(out, action, value)
        out.append(f"</{name}>")
    elif isinstance(value, bool):
        out.append(f"<{name}>{'true' if value else 'false'}</{name}>")
    elif value is not None:
        out.append(f"<{name}>{escape(str(value))}</{name}>")


# The Query protocol's wording where it differs from JSON's.
_QUERY_MESSAGES = {
    "The specified queue does not exist.": "The specified queue does not exist for this wsdl version.",
}


def query_message(error: errors.SQSError) -> str:
    return _QUERY_MESSAGES.get(error.message, error.message)


def encode_error(error: errors.SQSError, wire: WireError, request_id: str) -> tuple[dict[str, str], bytes]:
    if isinstance(error, errors.UnknownOperation):  # AWS's answer to a queue URL asked for no action
        return {}, b"<UnknownOperationException/>"
    message = query_message(error)
    body = (f'{_DECLARATION}<ErrorResponse xmlns="{NAMESPACE}"><Error><Type>{wire.fault}</Type>'
            f"<Code>{escape(wire.query_code)}</Code><Message>{escape(message)}</Message><Detail/></Error>"
            f"<RequestId>{escape(request_id)}</RequestId></ErrorResponse>")
    return {"x-amzn-query-error": f"{wire.query_code};{wire.fault}"}, body.encode("utf-8")
