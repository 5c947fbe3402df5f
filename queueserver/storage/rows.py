"""Named rows at the storage boundary, and the messages made from them.

The SQL selects its columns in the order of these tuples, and `_make` names them once as they
leave the cursor: a NamedTuple built from a row costs a fraction of `sqlite3.Row` and reads like
a record from then on.
"""

from __future__ import annotations

import json
from typing import Callable, Iterable, NamedTuple

from queueserver.models import BrowsedMessage, Delivery, ReceivedMessage, sequence_number


# The body id: the row's own, or the shared one of a subscription's delivery.
CLAIMED_COLUMNS = "id, receive_count, first_received_at_ms, receipt_token, group_id, coalesce(body_id, id)"


class ClaimedRow(NamedTuple):
    """A message row a receive has just claimed (CLAIMED_COLUMNS)."""

    row_id: int
    receive_count: int
    first_received_at_ms: int
    receipt_token: int
    group_id: str | None
    body_id: int


class BodyRow(NamedTuple):
    """A stored message body with what was sent along (BODY_COLUMNS of message_bodies)."""

    body_id: int
    message_id: str
    body: str
    md5_of_body: str
    attributes: str | None  # JSON
    trace_header: str | None
    sent_at_ms: int
    sender_id: str
    deduplication_id: str | None
    dead_letter_source_arn: str | None


BODY_COLUMNS = ", ".join(BodyRow._fields).replace("body_id", "id", 1)
# What a receive without attributes reads of a body: its id, then a Delivery's fields from the body.
DELIVERY_COLUMNS = "id, message_id, md5_of_body, body"
# The same read by a standard claim's RETURNING, a subquery per column: no second statement, and fewer
# columns (the sqlite3 module hands the GIL over for each statement and for each column of each row).
# The MD5 (always 32 hex digits) and the MessageId share a column.
_BODY_OF_ROW = "FROM message_bodies WHERE id = coalesce(messages.body_id, messages.id)"
CLAIMED_DELIVERY_COLUMNS = (f"id, receipt_token, (SELECT md5_of_body || message_id {_BODY_OF_ROW}),"
                            f" (SELECT body {_BODY_OF_ROW})")
_MD5_LENGTH = 32


class BrowsedRow(NamedTuple):
    """A message row seen by a browse (BROWSED_COLUMNS of messages); its body follows it in the row."""

    row_id: int
    visible_at_ms: int
    receive_count: int
    first_received_at_ms: int
    group_id: str | None


BROWSED_COLUMNS = "id, visible_at_ms, receive_count, first_received_at_ms, group_id"


class VisibilityState(NamedTuple):
    visible_at_ms: int
    receipt_token: int
    received_at_ms: int


def qualified(alias: str, columns: str) -> str:
    """`a.x, a.y` for the columns `x, y` of the table aliased `a`."""
    return ", ".join(f"{alias}.{column}" for column in columns.split(", "))


def claimed(rows: Iterable[tuple]) -> list[ClaimedRow]:
    return list(map(ClaimedRow._make, rows))


def received_messages(rows: Iterable[tuple], bodies: dict[int, tuple], queue_id: int, fifo: bool,
                      encode: Callable[[int, int, int], str]) -> list[ReceivedMessage]:
    """The messages a receive hands out (`rows`: ClaimedRows, or tuples in their order; `bodies`: tuples
    of BODY_COLUMNS by body id); `encode(queue_id, row_id, token)` makes each receipt handle."""
    received = []
    for row_id, receive_count, first_received_at_ms, receipt_token, group_id, body_id in rows:
        (_, message_id, body, md5_of_body, attributes, trace_header, sent_at_ms, sender_id, deduplication_id,
         dead_letter_source_arn) = bodies[body_id]  # BodyRow's fields, unpacked without building one
        received.append(ReceivedMessage(
            message_id, body, md5_of_body, None if attributes is None else json.loads(attributes),
            sent_at_ms, sender_id, receive_count, first_received_at_ms, trace_header, group_id,
            deduplication_id, sequence_number(row_id) if fifo else None, dead_letter_source_arn,
            encode(queue_id, row_id, receipt_token)))
    return received


def deliveries(rows: Iterable[tuple], bodies: dict[int, tuple], queue_id: int,
               encode: Callable[[int, int, int], str]) -> list[Delivery]:
    """The messages a receive that asks for no attributes hands out (`bodies`: tuples of DELIVERY_COLUMNS)."""
    new = tuple.__new__  # what Delivery(...) runs, without its Python frame per message
    delivered = []
    for row_id, _, _, receipt_token, _, body_id in rows:
        _, message_id, md5_of_body, body = bodies[body_id]
        delivered.append(new(Delivery, (message_id, encode(queue_id, row_id, receipt_token), md5_of_body, body)))
    return delivered


def claimed_deliveries(rows: Iterable[tuple], queue_id: int, encode: Callable[[int, int, int], str]) -> list[Delivery]:
    """The Deliveries of a claim that returned CLAIMED_DELIVERY_COLUMNS."""
    new = tuple.__new__
    return [new(Delivery, (md5_and_id[_MD5_LENGTH:], encode(queue_id, row_id, receipt_token),
                           md5_and_id[:_MD5_LENGTH], body))
            for row_id, receipt_token, md5_and_id, body in rows]


def browsed_messages(rows: Iterable[tuple], fifo: bool, now_ms: int) -> list[BrowsedMessage]:
    """The messages a browse shows (rows of BROWSED_COLUMNS then BODY_COLUMNS), each in its state at `now_ms`."""
    browsed = []
    split = len(BrowsedRow._fields)
    for raw in rows:
        row, b = BrowsedRow._make(raw[:split]), BodyRow._make(raw[split:])
        state = ("visible" if row.visible_at_ms <= now_ms else "in_flight" if row.receive_count > 0
                 else "delayed")
        browsed.append(BrowsedMessage(
            b.message_id, b.body, b.md5_of_body, None if b.attributes is None else json.loads(b.attributes),
            b.sent_at_ms, b.sender_id, row.receive_count, row.first_received_at_ms or None, b.trace_header,
            row.group_id, b.deduplication_id, sequence_number(row.row_id) if fifo else None,
            b.dead_letter_source_arn, row.row_id, state))
    return browsed
