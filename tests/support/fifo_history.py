"""A record of concurrent FIFO receives, and the checks the concurrency tests make on it.

Why the hold check is sound (it cannot blame a correct server):

* The server holds a group for a receive from its claim, at server time t, until the
  last message of that group in the receive is deleted, released or its visibility
  expires: [t, end]. (A group is available again once its first message is visible,
  so this needs receivers that delete in order and release a group's
  messages last first: then its first message is the last to leave.)
* The client notes `requested_at` (q) before it sends ReceiveMessage and `started` (h)
  when the response is in its hands, so q <= t <= h.
* For each message it notes the time just *before* it calls DeleteMessage or
  ChangeMessageVisibility, which is no later than the server's processing of that call.
  A message's visibility cannot end before t + VisibilityTimeout >= q + VisibilityTimeout,
  so the client's end is min(call time, q + VisibilityTimeout - MARGIN).
* So the client's interval [h, client end] lies inside the server's [t, end]. If two
  receives' client intervals for one group overlap, their server intervals overlap:
  the server handed the group to two receives at once.

Ordering: with non-overlapping holds, receives of one group sorted by `started` are in
the order the server made them, except a receive whose response arrived after its
visibility had already ended (an empty interval): those are "late", have no interval,
and are left out of the order check (the tests never delete from them).
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from dataclasses import dataclass, field

MARGIN = 0.05  # seconds: the server's millisecond rounding and clock reads, with room to spare


@dataclass
class Got:
    message_id: str
    group: str
    sequence: int
    receive_count: int
    outcome: str = "abandoned"  # deleted | released | abandoned | expired-before-delete
    called_at: float | None = None  # just before DeleteMessage / ChangeMessageVisibility


@dataclass
class Delivery:
    receiver: int
    requested_at: float
    started: float
    visibility: int
    messages: list[Got] = field(default_factory=list)

    @property
    def visibility_ends(self) -> float:
        return self.requested_at + self.visibility - MARGIN

    @property
    def late(self) -> bool:
        return self.started >= self.visibility_ends

    def hold_end(self, got: Got) -> float:
        end = self.visibility_ends
        return end if got.called_at is None else min(got.called_at, end)

    def groups(self) -> dict[str, list[Got]]:
        by_group: dict[str, list[Got]] = defaultdict(list)
        for got in self.messages:
            by_group[got.group].append(got)
        return by_group


class History:
    """Thread-safe log of every receive that returned messages."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deliveries: list[Delivery] = []

    def add(self, delivery: Delivery) -> None:
        with self._lock:
            self.deliveries.append(delivery)


def overlapping_holds(deliveries: list[Delivery]) -> list[str]:
    """Pairs of receives that held one group at overlapping times (client intervals)."""
    by_group: dict[str, list[tuple[float, float, int, int]]] = defaultdict(list)
    for n, d in enumerate(deliveries):
        if d.late:
            continue
        for group, gots in d.groups().items():
            end = max(d.hold_end(g) for g in gots)
            if end > d.started:
                by_group[group].append((d.started, end, d.receiver, n))
    problems = []
    for group, holds in by_group.items():
        holds.sort()
        latest_end, holder = float("-inf"), None
        for start, end, receiver, n in holds:
            if holder is not None and start < latest_end:
                problems.append(f"group {group}: receive #{n} (receiver {receiver}) started at {start:.4f}, "
                                f"inside receive #{holder[1]} (receiver {holder[0]}) held until {latest_end:.4f}")
            if end > latest_end:
                latest_end, holder = end, (receiver, n)
    return problems


def message_held_twice(deliveries: list[Delivery]) -> list[str]:
    """A message given to a receive while another receive still held it."""
    by_message: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for n, d in enumerate(deliveries):
        seen = set()
        for got in d.messages:
            if got.message_id in seen:
                return [f"receive #{n} returned {got.message_id} twice"]
            seen.add(got.message_id)
            if not d.late and d.hold_end(got) > d.started:
                by_message[got.message_id].append((d.started, d.hold_end(got), n))
    problems = []
    for message_id, holds in by_message.items():
        holds.sort()
        for (s1, e1, n1), (s2, _, n2) in itertools.pairwise(holds):
            if s2 < e1:
                problems.append(f"message {message_id}: receive #{n2} at {s2:.4f} while receive #{n1} "
                                f"held it until {e1:.4f}")
    return problems


def order_problems(deliveries: list[Delivery], sent: dict[str, list[int]]) -> list[str]:
    """Each receive of a group must be a prefix of the group's messages not yet deleted.

    That is strict order, no message skipped, and failed (released or expired) messages
    delivered again before any later message of their group. `sent` is each group's
    SequenceNumbers in send order. Also: every message is deleted exactly once.
    """
    problems = []
    remaining = {group: list(seqs) for group, seqs in sent.items()}
    for group, seqs in sent.items():
        if seqs != sorted(seqs):
            problems.append(f"group {group}: SequenceNumbers not increasing in send order")
    on_time = sorted((d for d in deliveries if not d.late), key=lambda d: d.started)
    for d in on_time:
        for group, gots in d.groups().items():
            got_seqs = [g.sequence for g in gots]
            expected = remaining.get(group, [])[:len(got_seqs)]
            if got_seqs != expected:
                problems.append(f"group {group}: receiver {d.receiver} at {d.started:.4f} got {got_seqs}, "
                                f"expected the next not-yet-deleted {expected}")
            for g in gots:
                if g.outcome == "deleted":
                    if g.sequence in remaining.get(group, []):
                        remaining[group].remove(g.sequence)
                    else:
                        problems.append(f"group {group}: {g.sequence} deleted twice")
    for d in deliveries:
        if d.late and any(g.outcome == "deleted" for g in d.messages):
            problems.append(f"a late receive (receiver {d.receiver}) deleted messages; the order check "
                            "cannot place it")
    for group, left in remaining.items():
        if left:
            problems.append(f"group {group}: never deleted {left}")
    return problems
