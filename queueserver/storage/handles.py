"""Receipt handles on the database thread: a visibility change by handle, and the errors of a
handle that is not one of ours or no longer holds its message."""

from __future__ import annotations

import sqlite3

from queueserver import errors, limits
from queueserver.models import DONE, EntryOutcome, Queue, VisibilityChange
from queueserver.storage import message_store
from queueserver.storage.receipts import ReceiptSigner


def invalid_handle(handle: str) -> errors.ReceiptHandleIsInvalid:
    return errors.ReceiptHandleIsInvalid(f'The input receipt handle "{handle}" is not a valid receipt handle.')


def expired_handle(handle: str) -> errors.InvalidParameterValue:
    return errors.invalid_value("ReceiptHandle", handle, "The receipt handle has expired.")


def change_one_visibility(conn: sqlite3.Connection, signer: ReceiptSigner, queue: Queue, change: VisibilityChange,
                          now: int) -> EntryOutcome:
    """On a standard queue any handle issued for the message changes its visibility, the handle of
    an earlier receive too, and after the visibility timeout ended (as SQS does: the MAC shows the
    handle is ours and names this message). On a FIFO queue only the latest handle, and only while
    the message is in flight under it."""
    receipt = signer.decode(change.receipt_handle)
    if receipt is None or receipt.queue_id != queue.id:
        return EntryOutcome(error=invalid_handle(change.receipt_handle))
    state = message_store.visibility_state(conn, queue.id, receipt.row_id)
    if queue.fifo and (state is None or state.receipt_token != receipt.token or state.visible_at_ms <= now):
        return EntryOutcome(error=expired_handle(change.receipt_handle))
    if state is None:
        return EntryOutcome(error=errors.invalid_value(
            "ReceiptHandle", change.receipt_handle,
            "Message does not exist or is not available for visibility timeout change."))
    new_visible_at = now + change.visibility_timeout * 1000
    if new_visible_at - state.received_at_ms > limits.MAX_VISIBILITY_TIMEOUT_SECONDS * 1000:
        return EntryOutcome(error=errors.invalid_value(
            "VisibilityTimeout", change.visibility_timeout,
            f"Total VisibilityTimeout for the message is beyond the limit "
            f"[{limits.MAX_VISIBILITY_TIMEOUT_SECONDS} seconds]"))
    message_store.set_visible_at(conn, receipt.row_id, new_visible_at)
    return DONE
