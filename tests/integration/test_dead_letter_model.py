"""A seeded random walk of receive / fail / delete / expire / move cycles against the real
server, checked step by step against a small model of where every message is.

The model keeps, per MessageId, its place (source, dead-letter queue, deleted by a
consumer, or expired), receive count, visibility, enqueue time and receipt handles.
It never depends on which of several visible messages a receive picks: the live
population is kept at most 10 and every receive asks for 10, so a receive delivers
exactly the visible messages under maxReceiveCount and dead-letters exactly the
visible ones at or over it. After every step the queues' counters (visible, in
flight, delayed) must equal the model's; at the end both queues are drained and each
MessageId must be found exactly once, in the place the model says.
"""

from __future__ import annotations

import os
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.dead_letters import wait_for_task
from support.sqs import Counts, counts, receive, unique_queue_name
from support.sqs import arn_of, redrive_policy

STEPS = 400
MAX_RECEIVE_COUNT = 2
VISIBILITY = 10  # seconds, on both queues
MAX_LIVE = 10  # every receive asks for 10, so it sees every visible message
SOURCE, DLQ, DELETED, EXPIRED = "source", "dlq", "deleted", "expired"


@dataclass
class Message:
    message_id: str
    body: str
    group: str | None
    place: str
    receive_count: int
    visible_at: int
    enqueued_at: int
    handle: str | None = None  # the latest handle, while it may still delete the message
    old_handles: list[tuple[str, str, bool]] = field(default_factory=list)  # (place, handle, dropped by a move)
    expired_in: str | None = None

    def drop_handle(self, by_move: bool = False) -> None:
        if self.handle is not None:
            self.old_handles.append((self.place, self.handle, by_move))
            self.handle = None


class Model:
    def __init__(self, fifo: bool, now: int, retention: dict[str, int], source_arn: str):
        self.fifo = fifo
        self.now = now
        self.retention_ms = {place: seconds * 1000 for place, seconds in retention.items()}
        self.source_arn = source_arn
        self.messages: dict[str, Message] = {}

    # -- state ------------------------------------------------------------------

    def expire(self) -> None:
        for m in self.messages.values():
            if m.place in (SOURCE, DLQ) and self.now - m.enqueued_at >= self.retention_ms[m.place]:
                m.expired_in = m.place
                m.place = EXPIRED

    def live(self, place: str | None = None) -> list[Message]:
        self.expire()
        return [m for m in self.messages.values()
                if m.place in (SOURCE, DLQ) and (place is None or m.place == place)]

    def counts(self, place: str) -> Counts:
        visible = in_flight = delayed = 0
        for m in self.live(place):
            if m.visible_at <= self.now:
                visible += 1
            elif m.receive_count > 0:
                in_flight += 1
            else:
                delayed += 1
        return Counts(visible, in_flight, delayed)

    # -- transitions ---------------------------------------------------------------

    def sent(self, message_id: str, body: str, group: str | None, delay: int) -> None:
        self.messages[message_id] = Message(message_id, body, group, SOURCE, 0, self.now + delay * 1000, self.now)

    def receive_outcome(self, place: str) -> tuple[set[str], set[str]]:
        """(delivered, dead-lettered) MessageIds for a receive of 10 on `place`."""
        delivered, moved = set(), set()
        for m in self.live(place):
            if m.visible_at > self.now:
                continue
            if place == SOURCE and m.receive_count >= MAX_RECEIVE_COUNT:
                moved.add(m.message_id)
            else:
                delivered.add(m.message_id)
        return delivered, moved

    def received(self, message_id: str, handle: str, visibility: int) -> None:
        m = self.messages[message_id]
        m.drop_handle()
        m.handle = handle
        m.receive_count += 1
        m.visible_at = self.now + visibility * 1000

    def dead_lettered(self, message_id: str) -> None:
        m = self.messages[message_id]
        m.drop_handle(by_move=True)
        m.place = DLQ
        m.visible_at = self.now
        if self.fifo:  # FIFO dead-letter queues count retention from the move
            m.enqueued_at = self.now

    def redriven(self, message_id: str) -> None:
        m = self.messages[message_id]
        m.drop_handle(by_move=True)
        m.place = SOURCE
        m.visible_at = self.now
        m.receive_count = 0
        m.enqueued_at = self.now  # a redriven message's retention starts again in its queue

    def delete_succeeds(self, m: Message, handle: str) -> bool:
        if handle != m.handle or m.place not in (SOURCE, DLQ):
            return False
        return not self.fifo or m.visible_at > self.now  # FIFO: only while in flight


@dataclass
class World:
    sqs: Any
    clock: Any
    rng: random.Random
    model: Model
    urls: dict[str, str]
    fifo: bool
    log: list[str] = field(default_factory=list)
    sent_count: int = 0
    events: Counter[str] = field(default_factory=Counter)

    def fail(self, message: str) -> None:
        tail = "\n".join(self.log[-25:])
        pytest.fail(f"{message}\n--- last steps ---\n{tail}")

    def check(self, what: str, condition: bool) -> None:
        if not condition:
            self.fail(what)

    # -- actions ---------------------------------------------------------------

    def send(self) -> None:
        if len(self.model.live()) >= MAX_LIVE:
            self.receive(SOURCE)
            return
        self.sent_count += 1
        body = f"m{self.sent_count}-{self.rng.randrange(1 << 30)}"
        kwargs: dict[str, Any] = {"QueueUrl": self.urls[SOURCE], "MessageBody": body}
        delay = 0
        group = None
        if self.fifo:
            group = f"g{self.sent_count}"  # a group per message: no group ever blocks another
            kwargs.update(MessageGroupId=group, MessageDeduplicationId=uuid.uuid4().hex)
        elif self.rng.random() < 0.2:
            delay = self.rng.choice([3, 12])
            kwargs["DelaySeconds"] = delay
        message_id = self.sqs.send_message(**kwargs)["MessageId"]
        self.model.sent(message_id, body, group, delay)
        self.log.append(f"send {message_id} delay={delay}")

    def receive(self, place: str, visibility: int = VISIBILITY) -> list[dict[str, Any]]:
        delivered, moved = self.model.receive_outcome(place)
        got = receive(self.sqs, self.urls[place], MaxNumberOfMessages=10, VisibilityTimeout=visibility,
                      MessageSystemAttributeNames=["All"])
        ids = [m["MessageId"] for m in got]
        self.log.append(f"receive {place}: got {sorted(ids)}, model moves {sorted(moved)}")
        self.check(f"receive on {place} delivered {sorted(ids)}, the model expected {sorted(delivered)}",
                   len(ids) == len(set(ids)) and set(ids) == delivered)
        for msg in got:
            m = self.model.messages[msg["MessageId"]]
            attrs = msg["Attributes"]
            self.check(f"{m.message_id}: body {msg['Body']!r} != {m.body!r}", msg["Body"] == m.body)
            self.check(f"{m.message_id}: ApproximateReceiveCount {attrs['ApproximateReceiveCount']}, "
                       f"model {m.receive_count + 1}", attrs["ApproximateReceiveCount"] == str(m.receive_count + 1))
            source_arn = attrs.get("DeadLetterQueueSourceArn")
            expected_arn = self.model.source_arn if place == DLQ else None
            self.check(f"{m.message_id}: DeadLetterQueueSourceArn {source_arn!r} in {place}",
                       source_arn == expected_arn)
            if self.fifo:
                self.check(f"{m.message_id}: group {attrs.get('MessageGroupId')}",
                           attrs.get("MessageGroupId") == m.group)
            self.model.received(m.message_id, msg["ReceiptHandle"], visibility)
        for message_id in moved:
            self.model.dead_lettered(message_id)
        self.events["dead-lettered"] += len(moved)
        return got

    def delete(self) -> None:
        held = [m for m in self.model.live() if m.handle is not None]
        if not held:
            self.receive(self.rng.choice([SOURCE, DLQ]))
            return
        m = self.rng.choice(held)
        self._delete_with(m, m.place, m.handle)

    def delete_with_an_old_handle(self) -> None:
        stale = [m for m in self.model.live() if m.old_handles]
        if not stale:
            return self.delete()
        # Zombie consumers. Most wanted: the last handle a message got in the queue it is in
        # now, from before it left that queue and came back (dead-lettered, then redriven) and
        # has not been received since. Next: any handle from before a move.
        back = []
        for m in stale:
            here = [h for h in m.old_handles if h[0] == m.place]
            if m.handle is None and here:
                back.append((m, here[-1]))
        moved = [(m, h) for m in stale for h in m.old_handles if h[2]]
        if back and self.rng.random() < 0.85:
            m, (place, handle, _) = self.rng.choice(back)
            self.events["old handle after a round trip"] += 1
        elif moved and self.rng.random() < 0.5:
            m, (place, handle, _) = self.rng.choice(moved)
        else:
            m = self.rng.choice(stale)
            place, handle, _ = self.rng.choice(m.old_handles)
        self._delete_with(m, place, handle)

    def _delete_with(self, m: Message, place: str, handle: str | None) -> None:
        assert handle is not None
        succeeds = place == m.place and self.model.delete_succeeds(m, handle)
        try:
            self.sqs.delete_message(QueueUrl=self.urls[place], ReceiptHandle=handle)
            outcome = "ok"
        except ClientError as exc:
            outcome = exc.response["Error"]["Code"]
        current = "current" if handle == m.handle else "old"
        self.log.append(f"delete {m.message_id} in {m.place} with a {current} {place} handle: {outcome}")
        if succeeds:
            self.check(f"deleting {m.message_id} with its current handle failed: {outcome}", outcome == "ok")
            m.drop_handle()
            m.place = DELETED
        elif self.fifo:  # FIFO rejects a handle that no longer holds the message in flight
            self.check(f"a stale handle for {m.message_id} gave {outcome}", outcome == "InvalidParameterValue")
        else:  # standard: accepted, deletes nothing
            self.check(f"a stale handle for {m.message_id} on a standard queue gave {outcome}", outcome == "ok")

    def change_visibility(self) -> None:
        held = [m for m in self.model.live() if m.handle is not None]
        if not held:
            return self.advance()
        m = self.rng.choice(held)
        timeout = self.rng.choice([0, 0, 30])
        in_flight = m.visible_at > self.model.now
        try:
            self.sqs.change_message_visibility(QueueUrl=self.urls[m.place], ReceiptHandle=m.handle,
                                               VisibilityTimeout=timeout)
            outcome = "ok"
        except ClientError as exc:
            outcome = exc.response["Error"]["Code"]
        self.log.append(f"change visibility of {m.message_id} in {m.place} to {timeout}: {outcome}")
        # AWS: the latest handle still changes a standard message whose visibility ended;
        # a FIFO one it does not (the handle has expired).
        if in_flight or not self.fifo:
            self.check(f"changing the visibility of {m.message_id} (in flight: {in_flight}) gave {outcome}",
                       outcome == "ok")
            m.visible_at = self.model.now + timeout * 1000
        else:
            self.check(f"changing the visibility of {m.message_id}, not in flight, gave {outcome}",
                       outcome == "InvalidParameterValue")

    def advance(self) -> None:
        seconds = self.rng.choice([1, 2, 5, 11, 11, 30])
        self.model.now = self.clock.advance(seconds)
        self.log.append(f"advance {seconds}s")

    def redrive(self) -> None:
        dlq_arn = arn_of(self.sqs, self.urls[DLQ])
        expected = {m.message_id for m in self.model.live(DLQ) if m.visible_at <= self.model.now}
        # messages past retention may still be on disk until the sweep: they can be counted as moved
        maybe = sum(1 for m in self.model.messages.values()
                    if m.place == EXPIRED and m.expired_in == DLQ and m.visible_at <= self.model.now)
        kwargs: dict[str, Any] = {"SourceArn": dlq_arn}
        if self.rng.random() < 0.5:
            kwargs["DestinationArn"] = self.model.source_arn
        self.sqs.start_message_move_task(**kwargs)
        task = wait_for_task(self.sqs, dlq_arn)
        moved = task["ApproximateNumberOfMessagesMoved"]
        self.log.append(f"redrive {sorted(expected)}: {task['Status']}, moved {moved}")
        self.check(f"the move task ended {task}", task["Status"] == "COMPLETED")
        self.check(f"the move task moved {moved}, the model expected {len(expected)} (+ up to {maybe} expired)",
                   len(expected) <= moved <= len(expected) + maybe)
        for message_id in expected:
            self.model.redriven(message_id)
        self.events["redriven"] += len(expected)
        # Often a consumer that failed on one of them before it was dead-lettered finishes now,
        # and deletes with the handle it got back then: that must delete nothing.
        zombies = [m for m in map(self.model.messages.__getitem__, sorted(expected))
                   if any(h[0] == SOURCE for h in m.old_handles)]
        if zombies and self.rng.random() < 0.6:
            m = self.rng.choice(zombies)
            place, handle, _ = [h for h in m.old_handles if h[0] == SOURCE][-1]
            self.events["a zombie consumer after a redrive"] += 1
            self._delete_with(m, place, handle)

    # -- checks ------------------------------------------------------------------

    def compare_counters(self) -> None:
        for place in (SOURCE, DLQ):
            actual = counts(self.sqs, self.urls[place])
            expected = self.model.counts(place)
            self.check(f"{place} counters {actual}, the model says {expected}", actual == expected)


def _make_queues(sqs: Any, fifo: bool) -> tuple[dict[str, str], dict[str, int]]:
    suffix = ".fifo" if fifo else ""
    base = {"FifoQueue": "true"} if fifo else {}
    # Standard: a message keeps its enqueue time in the DLQ, so the DLQ keeps messages longer.
    # FIFO: the DLQ counts from the move; keep DLQ retention long (only the source expires).
    retention = {SOURCE: 120, DLQ: 200 if not fifo else 1_209_600}
    dlq = sqs.create_queue(QueueName=unique_queue_name("model-dlq") + suffix, Attributes={
        **base, "VisibilityTimeout": str(VISIBILITY), "MessageRetentionPeriod": str(retention[DLQ])})["QueueUrl"]
    source = sqs.create_queue(QueueName=unique_queue_name("model-src") + suffix, Attributes={
        **base, "VisibilityTimeout": str(VISIBILITY), "MessageRetentionPeriod": str(retention[SOURCE]),
        "RedrivePolicy": redrive_policy(arn_of(sqs, dlq), MAX_RECEIVE_COUNT)})["QueueUrl"]
    return {SOURCE: source, DLQ: dlq}, retention


# More seeds on demand: QUEUESERVER_MODEL_SEEDS=1,2,3 pytest tests/integration/test_dead_letter_model.py
SEEDS = [int(s) for s in os.environ.get("QUEUESERVER_MODEL_SEEDS", "1234,98765").split(",")]

ACTIONS = [
    ("send", 22), ("receive_source", 14), ("receive_dlq", 6), ("delete", 12),
    ("delete_with_an_old_handle", 12), ("change_visibility", 6), ("advance", 16), ("redrive", 6),
]


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
@pytest.mark.parametrize("seed", SEEDS)
def test_every_message_is_in_exactly_one_place_through_random_receive_fail_delete_expire_and_move_cycles(
        sqs, clock, seed, fifo):
    rng = random.Random(seed)
    urls, retention = _make_queues(sqs, fifo)
    model = Model(fifo, clock.now_ms(), retention, arn_of(sqs, urls[SOURCE]))
    world = World(sqs, clock, rng, model, urls, fifo)
    names = [name for name, _ in ACTIONS]
    weights = [weight for _, weight in ACTIONS]
    seen = {name: 0 for name in names}
    for step in range(STEPS):
        action = rng.choices(names, weights)[0]
        seen[action] += 1
        world.log.append(f"-- step {step}: {action}")
        if action == "receive_source":
            world.receive(SOURCE)
        elif action == "receive_dlq":
            world.receive(DLQ)
        else:
            getattr(world, action)()
        world.compare_counters()

    # The end: every visibility runs out, then both queues are drained (the source first:
    # draining it dead-letters what is over the count), and every message is found once.
    model.now = clock.advance(40)  # past every visibility (the longest is 30 s) and delay
    world.log.append("-- drain")
    found: dict[str, list[str]] = {}
    for place in (SOURCE, DLQ):
        for _ in range(50):
            got = world.receive(place, visibility=3600)
            for msg in got:
                found.setdefault(msg["MessageId"], []).append(place)
            if not got and model.counts(place).visible == 0:
                break
        world.compare_counters()
    for message_id, places in found.items():
        world.check(f"{message_id} was found {places}", len(places) == 1)
    for m in model.messages.values():
        if m.place in (SOURCE, DLQ):
            world.check(f"{m.message_id} should be in the {m.place}, found in {found.get(m.message_id)}",
                        found.get(m.message_id) == [m.place])
        else:
            world.check(f"{m.message_id} was {m.place} but was found in {found.get(m.message_id)}",
                        m.message_id not in found)
    assert len(model.messages) == world.sent_count
    # the walk really exercised what it is about
    assert world.events["dead-lettered"] > 0 and world.events["redriven"] > 0, world.events
    assert sum(m.place == DELETED for m in model.messages.values()) > 0
    assert seen["advance"] > 0 and seen["delete_with_an_old_handle"] > 0, seen
