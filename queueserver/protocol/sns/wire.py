"""SNS's Query/XML: form parameters in, SNS's XML out (botocore's SNS model, protocol `query`).

`decode` turns the dotted parameters into nested members: `X.member.N` a list, `X.entry.N.key/value`
(or `.Name/.Value`, for message attributes) a map, anything else a structure. `encode` writes a
result dict: a list as `<member>` items, the `Attributes` map as `<entry><key/><value/></entry>`,
a dict as an element with its members.
"""

from __future__ import annotations

from typing import Any

from queueserver import errors
from queueserver.protocol.error_codes import WireError
from queueserver.protocol.query_wire import escape

NAMESPACE = "http://sns.amazonaws.com/doc/2010-03-31/"
CONTENT_TYPE = "text/xml"
_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'
_ENVELOPE = frozenset({"Action", "Version", "AWSAccessKeyId", "Signature", "SignatureMethod",
                       "SignatureVersion", "Timestamp", "Expires", "SecurityToken"})
MAX_NAME_PARTS = 10  # PublishBatchRequestEntries.member.N.MessageAttributes.entry.M.Value.StringValue has 8
MAX_INDEX = 1000  # no SNS list or map member is longer; a larger index is malformed
# Maps of the SNS model (everything else numbered is a list of `member`s).
_MAPS = frozenset({"Attributes", "MessageAttributes"})
# Actions whose answer has no <{Action}Result> element.
NO_RESULT = frozenset({"DeleteTopic", "SetTopicAttributes", "SetSubscriptionAttributes", "Unsubscribe",
                       "AddPermission", "RemovePermission"})


def decode(fields: dict[str, str]) -> dict[str, Any]:
    """The request's members from its flattened Query parameters."""
    root: dict[str, Any] = {}
    for name, value in fields.items():
        if name in _ENVELOPE or name.startswith("X-Amz-"):
            continue
        parts = name.split(".")
        if len(parts) > MAX_NAME_PARTS:
            raise errors.InvalidParameter(f"Invalid parameter: {name[:64]}")
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise errors.InvalidParameter(f"Invalid parameter: {name[:64]}")
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise errors.InvalidParameter(f"Invalid parameter: {name[:64]}")
        node[parts[-1]] = value
    return {name: _shape(name, value) for name, value in root.items()}


def _numbered(items: Any, name: str) -> list[Any]:
    if not isinstance(items, dict):
        return []
    numbered = []
    for index, item in items.items():
        if not (index.isascii() and index.isdigit() and 0 < int(index) <= MAX_INDEX):
            raise errors.InvalidParameter(f"Invalid parameter: {name}")
        numbered.append((int(index), item))
    return [item for _, item in sorted(numbered, key=lambda pair: pair[0])]


def _shape(name: str, node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if name in _MAPS and set(node) == {"entry"}:
        mapping: dict[str, Any] = {}
        for entry in _numbered(node["entry"], name):
            key = entry.get("key", entry.get("Name")) if isinstance(entry, dict) else None
            if not isinstance(key, str):
                raise errors.InvalidParameter(f"Invalid parameter: {name}")
            value = entry.get("value", entry.get("Value"))
            mapping[key] = _shape("Value", value) if isinstance(value, dict) else value
        return mapping
    if set(node) == {"member"}:
        return [_shape(name, item) if isinstance(item, dict) and "member" in item else
                ({k: _shape(k, v) for k, v in item.items()} if isinstance(item, dict) else item)
                for item in _numbered(node["member"], name)]
    return {key: _shape(key, value) for key, value in node.items()}


def encode(action: str, result: dict[str, Any], request_id: str) -> bytes:
    out = [_DECLARATION, f'<{action}Response xmlns="{NAMESPACE}">']
    if action not in NO_RESULT:
        inner: list[str] = []
        _members(inner, result)
        out.append(f"<{action}Result>{''.join(inner)}</{action}Result>" if inner else f"<{action}Result/>")
    out.append(f"<ResponseMetadata><RequestId>{escape(request_id)}</RequestId></ResponseMetadata>")
    out.append(f"</{action}Response>")
    return "".join(out).encode("utf-8")


def _members(out: list[str], members: dict[str, Any]) -> None:
    for name, value in members.items():
        if value is None:
            continue
        if name in _MAPS and isinstance(value, dict):
            out.append(f"<{name}>")
            for key, item in value.items():
                out.append(f"<entry><key>{escape(str(key))}</key><value>{escape(str(item))}</value></entry>")
            out.append(f"</{name}>")
        elif isinstance(value, list):
            out.append(f"<{name}>")
            for item in value:
                _element(out, "member", item)
            out.append(f"</{name}>")
        else:
            _element(out, name, value)


def _element(out: list[str], name: str, value: Any) -> None:
    if isinstance(value, dict):
        out.append(f"<{name}>")
        _members(out, value)
        out.append(f"</{name}>")
    elif isinstance(value, bool):
        out.append(f"<{name}>{'true' if value else 'false'}</{name}>")
    else:
        out.append(f"<{name}>{escape(str(value))}</{name}>")


def encode_error(error: errors.SQSError, wire: WireError, request_id: str) -> bytes:
    """SNS's error document: Type, Code, Message in <Error>, then the RequestId."""
    return (f'{_DECLARATION}<ErrorResponse xmlns="{NAMESPACE}"><Error><Type>{wire.fault}</Type>'
            f"<Code>{escape(wire.query_code)}</Code><Message>{escape(error.message)}</Message></Error>"
            f"<RequestId>{escape(request_id)}</RequestId></ErrorResponse>").encode("utf-8")
