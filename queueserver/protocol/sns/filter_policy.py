"""Subscription filter policies: checked when set (AWS's texts and limits), evaluated at each publish.

A policy is a JSON object; AND across its keys, OR across the values listed for one key and across
the branches of `$or`. Scope MessageAttributes matches the message's attributes (flat keys: String,
String.Array element by element, Number); scope MessageBody matches the JSON object of the body,
nested keys included. Matching is a walk of the policy: no pattern is compiled, nothing backtracks.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from queueserver import errors

MAX_KEYS = 5
MAX_COMBINATIONS = 150
MAX_POLICY_BYTES = 256 * 1024
MAX_DEPTH = 64  # nesting of a MessageBody policy; deeper is refused, so evaluation recursion stays bounded
_NUMERIC_OPERATORS = frozenset({"=", "<", "<=", ">", ">="})
_OPERATORS = frozenset({"prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists", "cidr"})


def check(text: str, scope: str, prefix: str) -> None:
    """InvalidParameter with AWS's text (after `prefix`) unless `text` is a policy SNS accepts."""
    def refuse(reason: str) -> errors.InvalidParameter:
        return errors.InvalidParameter(f"Invalid parameter: {prefix}FilterPolicy: {reason}")

    if len(text.encode("utf-8")) > MAX_POLICY_BYTES:
        raise refuse("Filter policy is too long")
    try:
        policy = parse_json(text)
    except ValueError as exc:
        raise refuse(f"failed to parse JSON. {exc}") from None
    if not isinstance(policy, dict):
        raise refuse("Filter policy must be a JSON object")
    try:
        combinations = _check_object(policy, scope, top=True)
    except ValueError as exc:
        raise refuse(str(exc)) from None
    if combinations > MAX_COMBINATIONS:
        raise refuse("Filter policy is too complex")


def _check_object(policy: dict[str, Any], scope: str, top: bool = False, depth: int = 0) -> int:
    """The policy's combinations (the product of its value counts; a sum over `$or` branches)."""
    if depth > MAX_DEPTH:
        raise ValueError("Filter policy is too complex")
    keys = [k for k in policy if k != "$or"]
    if top and len(keys) > MAX_KEYS:
        raise ValueError("Filter policy can not have more than 5 keys")
    combinations = 1
    for key in keys:
        value = policy[key]
        if isinstance(value, dict):
            if scope != "MessageBody":
                raise ValueError("Filter policy scope MessageAttributes does not support nested filter policy")
            combinations *= _check_object(value, scope, depth=depth + 1)
        elif isinstance(value, list):
            if not value:
                raise ValueError("Empty arrays are not allowed")
            for condition in value:
                _check_condition(condition)
            combinations *= len(value)
        else:
            raise ValueError(f'"{key}" must be an object or an array')
    if "$or" in policy:
        branches = policy["$or"]
        if not isinstance(branches, list) or len(branches) < 2 or not all(isinstance(b, dict) for b in branches):
            raise ValueError("Or statement must be an array of at least two objects")
        combinations *= sum(_check_object(branch, scope, top, depth + 1) for branch in branches)
    return combinations


def _check_condition(condition: Any) -> None:
    if condition is None or isinstance(condition, (str, bool, int, float)):
        return
    if not isinstance(condition, dict):
        raise ValueError("Match value must be String, number, true, false, or null")
    if len(condition) != 1:
        raise ValueError("Only one key allowed in match expression")
    [(operator, operand)] = condition.items()
    if operator not in _OPERATORS:
        raise ValueError(f"Unrecognized match type {operator}")
    if operator in ("prefix", "suffix", "equals-ignore-case") and not isinstance(operand, str):
        raise ValueError(f"{operator} match pattern must be a string")
    if operator == "exists" and not isinstance(operand, bool):
        raise ValueError("exists match pattern must be either true or false.")
    if operator == "anything-but":
        _check_anything_but(operand)
    if operator == "numeric":
        _numeric_range(operand)
    if operator == "cidr":
        _network(operand)


def _check_anything_but(operand: Any) -> None:
    if isinstance(operand, dict):
        if len(operand) != 1:
            raise ValueError("Only one key allowed in match expression")
        [(inner, value)] = operand.items()
        if inner != "prefix":
            raise ValueError(f"Unsupported anything-but pattern: {inner}")
        if not isinstance(value, str):
            raise ValueError("prefix match pattern must be a string")
        return
    values = operand if isinstance(operand, list) else [operand]
    if not values or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values):
        raise ValueError("Inside anything but list, start|null|boolean is not supported.")


def _number(value: Any, operator: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"Value of {'equals' if operator == '=' else operator} must be numeric")
    if not -1e9 <= value <= 1e9:
        raise ValueError(f"Bad value in numeric range: {value}")
    return float(value)


def _numeric_range(operand: Any) -> tuple[float | None, bool, float | None, bool]:
    """(low, low inclusive, high, high inclusive) of a `numeric` condition."""
    if not isinstance(operand, list) or not operand:
        raise ValueError("Value of numeric must be an array.")
    if len(operand) % 2 or len(operand) > 4:
        raise ValueError("Too many elements in numeric expression" if len(operand) > 4 else
                         f"Invalid member in numeric match: {operand[-1]}")
    low = high = None
    low_in = high_in = False
    for i in range(0, len(operand), 2):
        operator = operand[i]
        if not isinstance(operator, str):
            raise ValueError(f"Invalid member in numeric match: {operator}")
        if operator not in _NUMERIC_OPERATORS:
            raise ValueError(f"Unrecognized numeric range operator: {operator}")
        value = _number(operand[i + 1], operator)
        if operator == "=":
            if len(operand) > 2:
                raise ValueError("Too many terms in numeric range expression")
            return value, True, value, True
        if operator in (">", ">="):
            if low is not None:
                raise ValueError(f"Bad numeric range operator: {operator}")
            low, low_in = value, operator == ">="
        else:
            if high is not None or low is None and i > 0:
                raise ValueError(f"Bad numeric range operator: {operator}")
            high, high_in = value, operator == "<="
    if low is not None and high is not None and low >= high:
        raise ValueError("Bottom must be less than top")
    return low, low_in, high, high_in


def _network(operand: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    if not isinstance(operand, str):
        raise ValueError("prefix match pattern must be a string")
    address, slash, mask = operand.partition("/")
    if not slash or "/" in mask:
        raise ValueError("Malformed CIDR, one '/' required")
    if not mask.isdigit():
        raise ValueError("Malformed CIDR, mask bits must be an integer")
    try:
        return ipaddress.ip_network(f"{address}/{mask}", strict=False)
    except ValueError:
        raise ValueError(f"Nonstandard IP address: {address}") from None


# -- evaluation ---------------------------------------------------------------------

_ABSENT = object()


def parse_json(text: str) -> Any:
    """json.loads, with a document nested past the parser's recursion limit refused as malformed."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the document is nested too deeply") from None


def refusal_of_attributes(policy: dict[str, Any], attributes: dict[str, dict[str, str]] | None) -> str | None:
    """Scope MessageAttributes: None when the attributes match (a String.Array's elements, a Number as a
    number), else why not: NoMessageAttributes, InvalidAttributes or MessageAttributes."""
    if not attributes:
        return "NoMessageAttributes"  # even `exists: false` does not match a message with no attributes at all
    invalid = False
    values: dict[str, Any] = {}
    for name, attribute in attributes.items():
        data_type = attribute.get("DataType", "")
        text = attribute.get("StringValue")
        if text is None:
            continue  # a Binary attribute is never matched
        if data_type.startswith("Number"):
            try:
                values[name] = [float(text)]
            except ValueError:
                values[name], invalid = [], True
        elif data_type.startswith("String.Array"):
            try:
                parsed = parse_json(text)
            except ValueError:
                parsed = None
            values[name] = parsed if isinstance(parsed, list) else []
            invalid = invalid or not isinstance(parsed, list)
        else:
            values[name] = [text]
    if _matches_object(policy, values):
        return None
    return "InvalidAttributes" if invalid else "MessageAttributes"


def refusal_of_body(policy: dict[str, Any], body: str) -> str | None:
    """Scope MessageBody: None when the body (a JSON object, nested keys matched level by level) matches,
    else why not: InvalidMessageBody or MessageBody."""
    try:
        document = parse_json(body)
    except ValueError:
        return "InvalidMessageBody"
    if not isinstance(document, dict):
        return "InvalidMessageBody"
    return None if _matches_object(policy, document) else "MessageBody"


def _matches_object(policy: dict[str, Any], document: dict[str, Any]) -> bool:
    for key, conditions in policy.items():
        if key == "$or":
            if not any(_matches_object(branch, document) for branch in conditions):
                return False
            continue
        value = document.get(key, _ABSENT)
        if isinstance(conditions, dict):
            if not isinstance(value, dict) or not _matches_object(conditions, value):
                return False
        elif not _matches_key(conditions, value):
            return False
    return True


def _matches_key(conditions: list[Any], value: Any) -> bool:
    if value is _ABSENT:
        return any(isinstance(c, dict) and c.get("exists") is False for c in conditions)
    values = value if isinstance(value, list) else [value]
    return any(_matches(condition, v) for condition in conditions for v in values)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _matches(condition: Any, value: Any) -> bool:
    if not isinstance(condition, dict):
        if _is_number(condition):
            return _is_number(value) and float(value) == float(condition)
        return type(value) is type(condition) and value == condition
    [(operator, operand)] = condition.items()
    if operator == "exists":
        return operand is True
    if operator == "prefix":
        return isinstance(value, str) and value.startswith(operand)
    if operator == "suffix":
        return isinstance(value, str) and value.endswith(operand)
    if operator == "equals-ignore-case":
        return isinstance(value, str) and value.casefold() == operand.casefold()
    if operator == "anything-but":
        if isinstance(operand, dict):
            return isinstance(value, str) and not value.startswith(operand["prefix"])
        listed = operand if isinstance(operand, list) else [operand]
        return not any(_matches(item, value) for item in listed)
    if operator == "numeric":
        if not _is_number(value):
            return False
        low, low_in, high, high_in = _numeric_range(operand)
        number = float(value)
        return ((low is None or number > low or (low_in and number == low))
                and (high is None or number < high or (high_in and number == high)))
    if operator == "cidr":
        try:
            return isinstance(value, str) and ipaddress.ip_address(value) in _network(operand)
        except ValueError:
            return False
    return False
