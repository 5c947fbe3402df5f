"""The worker's record of one received message, and how messages become units of work.

Every received message is tracked from the receive until SQS confirms what became
of it (deleted, or its visibility changed), because until then the worker owns its
visibility: the heartbeat extends it, and a shutdown must release it.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Any


class State(enum.Enum):
    WAITING = "waiting"  # received, handler not started
    RUNNING = "running"  # handler running
    SETTLING = "settling"  # handler done (or never to run); a delete or visibility change is on its way
    DONE = "done"  # nothing more to do


@dataclass(eq=False)
class Tracked:
    """One received message. Times are the worker clock's milliseconds."""

    message: dict[str, Any]  # as boto3 returned it; the handler may do what it likes with it
    receipt_handle: str  # kept apart, so a handler that edits its message cannot lose it
    received_at_ms: int  # read just before the ReceiveMessage call: never later than SQS's own receive
    deadline_ms: int  # when the worker believes its visibility ends
    group: str | None  # MessageGroupId on a FIFO queue, else None
    state: State = State.WAITING
    lost: bool = False  # no longer extendable (invalid handle, 12-hour limit, expired)
    extension: asyncio.Future[None] | None = field(default=None, repr=False)  # an extension in flight

    @property
    def message_id(self) -> str:
        return str(self.message.get("MessageId", "?"))

    @property
    def active(self) -> bool:
        """Still the worker's to run (waiting or running)."""
        return self.state in (State.WAITING, State.RUNNING)


def units_of_work(received: list[Tracked], fifo: bool) -> list[list[Tracked]]:
    """Split one receive into units that run independently.

    On a standard queue every message is its own unit. On a FIFO queue a unit is one
    message group's messages in the order SQS returned them (which is the group's
    order), so they run one after another.
    """
    if not fifo:
        return [[t] for t in received]
    groups: dict[str | None, list[Tracked]] = {}
    for t in received:
        groups.setdefault(t.group, []).append(t)
    return list(groups.values())
