"""Text a client sent, read so that no value of it can raise: what cannot be read is None.

The standard readers have traps a handler would meet as a 500: `json.loads` raises RecursionError
on deep nesting (3,000 levels of `[`) and reads NaN and Infinity; `str.isdigit` is true of '²' and
of Arabic-Indic digits, which `int()` then refuses or reads; and an integer beyond 64 bits cannot
be bound into SQLite. Every document, token and count that arrives as text is read through here.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_JSON_DEPTH = 32  # a queue policy is 5 or 6 deep (Statement, Condition, operator, key, values)
MAX_INTEGER = 2**63 - 1  # SQLite's

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)  # linear: the alternatives never overlap
_BRACKETS = re.compile(r"[\[\]{}]")


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def json_document(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of `text`, or None if it is not JSON (nor UTF-8), holds NaN or Infinity, or nests
    deeper than `max_depth` (counted before parsing, so the parser never recurses that deep).
    JSON `null` also reads as None: no document here may be null."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    nesting = [1 if bracket in "[{" else -1 for bracket in _BRACKETS.findall(_STRINGS.sub("", text))]
    if max(accumulate(nesting), default=0) > max_depth:
        return None
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError):  # ValueError: also an integer of more than 4,300 digits
        return None


def whole_number(text: str, maximum: int = MAX_INTEGER) -> int | None:
    """A whole number written in ASCII digits alone, at most `maximum`; None otherwise."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(maximum)):
        return None
    number = int(text)
    return number if number <= maximum else None
