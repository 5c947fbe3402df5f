"""Policy Condition blocks: every IAM condition operator (String, Numeric, Date, Bool, BinaryEquals,
IpAddress, Arn, Null), with `IfExists` and the `ForAnyValue:` / `ForAllValues:` set operators.

As in IAM: several values for one key match when any does (a negated operator when none does);
several keys and several operators must all hold; a key absent from the request fails a positive
operator and passes a negated one, unless `IfExists` (then it holds). Every key here has one value
at most, so a set operator sees a set of one (or none): `ForAnyValue:` holds when that value
matches (never for an absent key), `ForAllValues:` when it matches or the key is absent. `…Like`
values (and the Arn operators') are wildcards.py patterns, cut once when the policy is read.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from operator import eq, ge, gt, le, lt
from typing import Any, Callable

from queueserver.auth.wildcards import Wildcard
from queueserver.errors import ConditionError


def _like(pattern: Wildcard, value: str) -> bool:
    return pattern.match(value)


def _number(text: str) -> float:
    return float(text)


def _date(text: str) -> float:
    """Epoch seconds from an ISO 8601 date-time or a number of epoch seconds."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def _ip(pattern: str, value: str) -> bool:
    return ipaddress.ip_address(value) in ipaddress.ip_network(pattern, strict=False)


def _compare(convert: Callable[[str], float], test: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    return lambda pattern, value: test(convert(value), convert(pattern))


# operator -> (does one value match, negated); a pattern is a value as _PATTERNS prepares it
_OPERATORS: dict[str, tuple[Callable[[Any, str], bool], bool]] = {
    "StringEquals": (lambda p, v: v == p, False),
    "StringNotEquals": (lambda p, v: v == p, True),
    "StringEqualsIgnoreCase": (lambda p, v: v.lower() == p.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda p, v: v.lower() == p.lower(), True),
    "StringLike": (_like, False),
    "StringNotLike": (_like, True),
    "ArnEquals": (_like, False),
    "ArnLike": (_like, False),
    "ArnNotEquals": (_like, True),
    "ArnNotLike": (_like, True),
    "Bool": (lambda p, v: v.lower() == p.lower(), False),
    "BinaryEquals": (lambda p, v: base64.b64encode(v.encode()).decode() == p, False),
    "IpAddress": (_ip, False),
    "NotIpAddress": (_ip, True),
}
# NumericEquals … DateGreaterThanEquals: each comparison, over numbers and over dates.
_COMPARISONS = {"Equals": (eq, False), "NotEquals": (eq, True), "LessThan": (lt, False), "LessThanEquals": (le, False),
                "GreaterThan": (gt, False), "GreaterThanEquals": (ge, False)}
_OPERATORS.update({f"{kind}{name}": (_compare(convert, test), negated)
                   for kind, convert in (("Numeric", _number), ("Date", _date))
                   for name, (test, negated) in _COMPARISONS.items()})
_PATTERNS = frozenset(name for name, (test, _) in _OPERATORS.items() if test is _like)
_CHECKS: dict[str, Callable[[str], Any]] = {
    "Numeric": _number, "Date": _date, "IpAddress": ipaddress.ip_network, "NotIpAddress": ipaddress.ip_network,
    "BinaryEquals": lambda value: base64.b64decode(value, validate=True),
}
_SET_OPERATORS = ("ForAnyValue", "ForAllValues")


@dataclass(frozen=True, slots=True)
class Condition:
    operator: str  # without IfExists
    key: str  # lower-case: condition key names are case-insensitive
    values: tuple[str, ...]
    if_exists: bool
    patterns: tuple[Any, ...]  # what the operator's test takes: the values, or Wildcards of them
    set_operator: str = ""  # "", "ForAnyValue" or "ForAllValues"

    def holds(self, context: dict[str, str]) -> bool:
        value = context.get(self.key)
        if self.set_operator and self.operator != "Null":
            if value is None:  # the empty set: no value matches any, every value (none) matches all
                return self.if_exists or self.set_operator == "ForAllValues"
            return self._one(value)
        if self.operator == "Null":
            return (value is None) == (self.values[0].lower() == "true")
        if value is None:
            return self.if_exists or _OPERATORS[self.operator][1]
        return self._one(value)

    def _one(self, value: str) -> bool:
        test, negated = _OPERATORS[self.operator]
        try:
            matched = any(test(pattern, value) for pattern in self.patterns)
        except ValueError:  # a request value the operator cannot read (an IPv6 peer against an IPv4 range…)
            matched = False
        return not matched if negated else matched


def _values(raw: Any, where: str) -> tuple[str, ...]:
    values = raw if isinstance(raw, list) else [raw]
    if not values or not all(isinstance(v, (str, bool, int, float)) for v in values):
        raise ConditionError(f"{where}: values must be strings, numbers or booleans")
    return tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in values)


def parse_conditions(block: Any) -> tuple[Condition, ...]:
    if not isinstance(block, dict):
        raise ConditionError("Condition must be an object")
    conditions = []
    for name, keys in block.items():
        set_operator, _, bare = name.rpartition(":")
        if set_operator not in ("", *_SET_OPERATORS):
            raise ConditionError(f"unsupported condition set operator {set_operator}")
        operator, if_exists = (bare[:-len("IfExists")], True) if bare.endswith("IfExists") else (bare, False)
        if operator not in _OPERATORS and (operator != "Null" or if_exists):
            raise ConditionError(f"unsupported condition operator {name}")
        if not isinstance(keys, dict) or not keys:
            raise ConditionError(f"{name} must map condition keys to values")
        for key, raw in keys.items():
            values = _values(raw, f"{name} {key}")
            check = next((c for prefix, c in _CHECKS.items() if operator.startswith(prefix)), None)
            try:
                for value in values:
                    if check is not None:
                        check(value)
            except (ValueError, binascii.Error):
                raise ConditionError(f"{name} {key}: {values!r} are not values this operator reads") from None
            patterns = tuple(Wildcard(v) for v in values) if operator in _PATTERNS else values
            conditions.append(Condition(operator, key.lower(), values, if_exists, patterns, set_operator))
    return tuple(conditions)
