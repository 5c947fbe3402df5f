"""Topics and their subscriptions in memory, and a publish: every matching subscribed queue in one transaction.

A publish is one operation on the database thread: for each message, each subscription of the topic
is asked (`render`) what its queue receives, if anything (its filter policy, its envelope or raw
body), and the messages go through the queue's own send (sending.py: FIFO deduplication, the queue's
own subscriptions, long-poll wake-ups), all in the transaction whose COMMIT answers the publisher. So
an acknowledged publish is in every queue it matched, and a publish not acknowledged is in none.

The topics are read into memory on first use and changed at each operation's end, with an undo
should the group roll back (operations.py: an operation may run twice). Only the database thread changes
them; the event loop reads them, copying a dict's values in one step (list()) before walking them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Awaitable, Callable

from queueserver import errors
from queueserver.clock import Clock
from queueserver.models import FilteredOut, NewMessage, Publication, Published, Queue, Topic, TopicSubscription
from queueserver.storage import topic_store
from queueserver.storage.database import Database
from queueserver.storage.operations import Transaction
from queueserver.storage.queue_cache import QueueCache
from queueserver.storage.receiving import DEDUPLICATION_WINDOW_MS
from queueserver.storage.sending import Sending

# What a subscription's queue receives of a publication, given the FIFO topic's SequenceNumber: FilteredOut
# when its filter policy turns the publication away, a reason (str) when it cannot be delivered.
Render = Callable[[Publication, TopicSubscription, str | None], NewMessage | FilteredOut | str]
# Whether the queue lets the topic send to it (its Policy, with credentials on).
MayDeliver = Callable[[Queue, Topic], bool]


@dataclasses.dataclass(slots=True)
class TopicTally:
    """A topic's CloudWatch counters (AWS/SNS), since the server started."""

    published: int = 0
    publish_bytes: int = 0
    delivered: int = 0
    filtered_out: int = 0
    failed: int = 0
    redriven_to_dlq: int = 0
    failed_to_redrive_to_dlq: int = 0
    filtered_out_by: dict[str, int] = dataclasses.field(default_factory=dict)  # by FilteredOut.reason


class Topics:
    def __init__(self, db: Database, clock: Clock, queues: QueueCache, sending: Sending,
                 count_sent: Callable[[Queue, list[NewMessage], int], None]) -> None:
        self._db = db
        self._clock = clock
        self._queues = queues
        self._sending = sending
        self._count_sent = count_sent
        self._by_key: dict[tuple[str, str, str], Topic] | None = None  # None until loaded
        self._by_id: dict[int, Topic] = {}
        self._subscriptions: dict[str, TopicSubscription] = {}  # by ARN
        self._by_topic: dict[int, dict[str, TopicSubscription]] = {}  # by topic id, then ARN
        self.tallies: dict[int, TopicTally] = {}  # by topic id

    async def load(self) -> None:
        """Read the topics into memory: once, when the engine opens (a later call returns at once)."""
        if self._by_key is not None:
            return
        topics, subscriptions = await self._db.run(
            lambda tx: (topic_store.load_topics(tx.conn), topic_store.load_subscriptions(tx.conn)))
        if self._by_key is None:
            self._by_key = {}
            for topic in topics:
                self._place_topic((topic.region, topic.account, topic.name), None, topic)
            for subscription in subscriptions:
                self._place_subscription(subscription.arn, None, subscription)

    # -- reading ---------------------------------------------------------------

    def _topics(self) -> dict[tuple[str, str, str], Topic]:
        if self._by_key is None:
            raise RuntimeError("Topics.load() must run first")
        return self._by_key

    def get(self, region: str, account: str, name: str) -> Topic | None:
        return self._topics().get((region, account, name))

    def listed(self, region: str, account: str) -> list[Topic]:
        """The account's topics in the region, by ARN."""
        everything = list(self._topics().values())  # one C step: the database thread may change the dict
        return sorted((t for t in everything if t.region == region and t.account == account), key=lambda t: t.arn)

    def loaded(self) -> list[Topic]:
        """Every topic, first created first; none before `load` (the first SNS request or scrape) read them."""
        return [] if self._by_key is None else sorted(list(self._by_key.values()), key=lambda t: t.id)

    def subscription(self, arn: str) -> TopicSubscription | None:
        self._topics()
        return self._subscriptions.get(arn)

    def subscriptions(self, topic: Topic | None = None, region: str | None = None,
                      account: str | None = None) -> list[TopicSubscription]:
        """The subscriptions of `topic`, or of every topic of the account and region, by ARN."""
        self._topics()
        if topic is not None:
            return sorted(list(self._by_topic.get(topic.id, {}).values()), key=lambda s: s.arn)
        by_id = self._by_id
        chosen = [s for s in list(self._subscriptions.values())
                  if (region is None or by_id[s.topic_id].region == region)
                  and (account is None or by_id[s.topic_id].account == account)]
        return sorted(chosen, key=lambda s: s.arn)

    def topic_of(self, subscription: TopicSubscription) -> Topic:
        return self._by_id[subscription.topic_id]

    # -- changing --------------------------------------------------------------

    def _set_topic(self, tx: Transaction, topic: Topic, gone: bool = False) -> None:
        """The topic changed (or `gone`) at this operation's end, undone if the group rolls back."""
        key = (topic.region, topic.account, topic.name)
        before, after = self._topics().get(key), None if gone else topic
        self._place_topic(key, before, after)
        tx.on_rollback(lambda: self._place_topic(key, after, before))

    def _place_topic(self, key: tuple[str, str, str], old: Topic | None, new: Topic | None) -> None:
        topics = self._topics()
        if old is not None:
            topics.pop(key, None)
            self._by_id.pop(old.id, None)
        if new is not None:
            topics[key] = new
            self._by_id[new.id] = new

    def _set_subscription(self, tx: Transaction, arn: str, subscription: TopicSubscription | None) -> None:
        before = self._subscriptions.get(arn)
        self._place_subscription(arn, before, subscription)
        tx.on_rollback(lambda: self._place_subscription(arn, subscription, before))

    def _place_subscription(self, arn: str, old: TopicSubscription | None, new: TopicSubscription | None) -> None:
        if old is not None:
            self._subscriptions.pop(arn, None)
            of_topic = self._by_topic.get(old.topic_id)
            if of_topic is not None:
                of_topic.pop(arn, None)
                if not of_topic:
                    del self._by_topic[old.topic_id]
        if new is not None:
            self._subscriptions[arn] = new
            self._by_topic.setdefault(new.topic_id, {})[arn] = new

    async def create_topic(self, region: str, account: str, name: str, fifo: bool, attributes: dict[str, str],
                           tags: dict[str, str], check_existing: Callable[[Topic], None]) -> Topic:
        """Create the topic, or return the existing one once `check_existing` accepts the request for it."""
        now = self._clock.now_ms()

        def create(tx: Transaction) -> Topic:
            existing = self._topics().get((region, account, name))
            if existing is not None:
                check_existing(existing)
                return existing
            topic = topic_store.insert_topic(tx.conn, region, account, name, fifo, attributes, tags, now)
            self._set_topic(tx, topic)
            return topic

        return await self._db.run(create)

    async def update_topic(self, topic: Topic,
                           change: Callable[[dict[str, str], dict[str, str]], tuple[dict[str, str], dict[str, str]]],
                           ) -> Topic:
        """Apply `change(attributes, tags) -> (attributes, tags)` atomically."""
        def update(tx: Transaction) -> Topic:
            current = self._current(topic)
            attributes, tags = change(dict(current.attributes), dict(current.tags))
            updated = topic_store.update_topic(tx.conn, topic.id, attributes, tags)
            self._set_topic(tx, updated)
            return updated

        return await self._db.run(update)

    async def delete_topic(self, topic: Topic) -> None:
        """The topic and its subscriptions; nothing for a topic already gone (DeleteTopic is idempotent)."""
        def delete(tx: Transaction) -> None:
            current = self._topics().get((topic.region, topic.account, topic.name))
            if current is None or current.id != topic.id:
                return
            topic_store.delete_topic(tx.conn, topic.id)
            for sub in list(self._by_topic.get(topic.id, {}).values()):
                self._set_subscription(tx, sub.arn, None)
            self._set_topic(tx, current, gone=True)

        await self._db.run(delete)
        self.tallies.pop(topic.id, None)

    def _current(self, topic: Topic) -> Topic:
        current = self._topics().get((topic.region, topic.account, topic.name))
        if current is None or current.id != topic.id:
            raise errors.TopicNotFound("Topic does not exist")
        return current

    async def subscribe(self, topic: Topic, arn: str, protocol: str, endpoint: str, owner: str, principal: str,
                        attributes: dict[str, str],
                        check_existing: Callable[[TopicSubscription], None]) -> TopicSubscription:
        """Subscribe the endpoint, or return its subscription once `check_existing` accepts the request for it."""
        now = self._clock.now_ms()

        def subscribe(tx: Transaction) -> TopicSubscription:
            self._current(topic)
            for existing in self._by_topic.get(topic.id, {}).values():
                if (existing.protocol, existing.endpoint) == (protocol, endpoint):
                    check_existing(existing)
                    return existing
            created = topic_store.insert_subscription(tx.conn, topic.id, arn, protocol, endpoint, owner, principal,
                                                      attributes, now)
            self._set_subscription(tx, arn, created)
            return created

        return await self._db.run(subscribe)

    async def update_subscription(self, subscription: TopicSubscription,
                                  change: Callable[[dict[str, str]], dict[str, str]]) -> TopicSubscription:
        def update(tx: Transaction) -> TopicSubscription:
            current = self._subscriptions.get(subscription.arn)
            if current is None:
                raise errors.TopicNotFound("Subscription does not exist")
            updated = topic_store.update_subscription(tx.conn, current.id, change(dict(current.attributes)))
            self._set_subscription(tx, current.arn, updated)
            return updated

        return await self._db.run(update)

    async def unsubscribe(self, subscription: TopicSubscription) -> None:
        def unsubscribe(tx: Transaction) -> None:
            if self._subscriptions.get(subscription.arn) is None:
                return
            topic_store.delete_subscription(tx.conn, subscription.id)
            self._set_subscription(tx, subscription.arn, None)

        await self._db.run(unsubscribe)

    async def signing_material(self, make: Callable[[], Awaitable[tuple[str, str]]]) -> tuple[str, str]:
        """The database's (key PEM, certificate PEM), made with `await make()` the first time and kept."""
        kept = await self._db.run(lambda tx: topic_store.signing_material(tx.conn))
        if kept is not None:
            return kept
        key_pem, cert_pem = await make()
        return await self._db.run(lambda tx: topic_store.keep_signing_material(tx.conn, key_pem, cert_pem))

    # -- publishing ------------------------------------------------------------

    async def publish(self, topic: Topic, publications: list[Publication], render: Render,
                      may_deliver: MayDeliver, *, sender_id: str) -> list[Published]:
        """Store each publication in every subscribed queue it matches, all in one transaction; a FIFO
        topic answers a repeated deduplication id within five minutes with the first MessageId."""
        now = self._clock.now_ms()

        def publish(tx: Transaction) -> tuple[list[Published], dict[int, tuple[Queue, list[NewMessage]]]]:
            current = self._current(topic)
            subscriptions = sorted(self._by_topic.get(current.id, {}).values(), key=lambda s: s.id)
            if current.fifo:
                topic_store.forget_expired_deduplication(tx.conn, current.id, now)
            answers: list[Published] = []
            per_queue: dict[int, tuple[Queue, list[NewMessage]]] = {}
            for publication in publications:
                answer = Published(publication.message_id)
                if current.fifo:
                    if self._repeated(tx, current, publication, answer, now):
                        answers.append(answer)
                        continue
                for subscription in subscriptions:
                    self._route(publication, subscription, current, answer, per_queue, render, may_deliver)
                answers.append(answer)
            for queue, messages in per_queue.values():
                self._sending.send(tx, queue, messages, now, sender_id)
            return answers, per_queue

        answers, per_queue = await self._db.run(publish)
        for queue, messages in per_queue.values():
            self._count_sent(queue, messages, now)
        tally = self.tallies.get(topic.id) or self.tallies.setdefault(topic.id, TopicTally())
        for publication, answer in zip(publications, answers):
            tally.published += 1
            tally.publish_bytes += publication.size
            tally.delivered += answer.delivered
            tally.filtered_out += len(answer.filtered_out)
            for reason in answer.filtered_out:
                tally.filtered_out_by[reason] = tally.filtered_out_by.get(reason, 0) + 1
            tally.failed += answer.failed
            tally.redriven_to_dlq += answer.redriven
            tally.failed_to_redrive_to_dlq += answer.not_redriven
        return answers

    @staticmethod
    def _repeated(tx: Transaction, topic: Topic, publication: Publication, answer: Published, now: int) -> bool:
        """A FIFO publication: its SequenceNumber, or True for a repeat (answered with the first's ids)."""
        dedup = publication.deduplication_id or ""
        duplicate = topic_store.find_duplicate(tx.conn, topic.id, dedup, now)
        if duplicate is not None:
            answer.message_id, answer.sequence_number = duplicate
            return True
        answer.sequence_number = f"{topic_store.next_sequence(tx.conn, topic.id):020d}"
        topic_store.remember_deduplication(tx.conn, topic.id, dedup, now + DEDUPLICATION_WINDOW_MS,
                                           answer.message_id, answer.sequence_number)
        return False

    def _route(self, publication: Publication, subscription: TopicSubscription, topic: Topic, answer: Published,
               per_queue: dict[int, tuple[Queue, list[NewMessage]]], render: Render, may_deliver: MayDeliver) -> None:
        """What the subscription's queue (or, if that cannot take it, its dead-letter queue) receives."""
        message = render(publication, subscription, answer.sequence_number)
        if isinstance(message, FilteredOut):
            answer.filtered_out.append(message.reason)
            return
        if isinstance(message, str):  # undeliverable anywhere (its dead-letter queue would refuse it too)
            answer.failed += 1
            return
        queue = self._queues.find_by_arn_in_transaction(subscription.endpoint)
        if queue is None or queue.subscribed_to is not None or not may_deliver(queue, topic) or (
                queue.fifo and message.group_id is None):
            # A client-side failure, not retried: to the subscription's dead-letter queue if it has one.
            answer.failed += 1
            queue = self._dead_letter_queue(subscription)
            if queue is None or not may_deliver(queue, topic) or (queue.fifo and message.group_id is None):
                if subscription.attributes.get("RedrivePolicy"):
                    answer.not_redriven += 1
                return
            answer.redriven += 1
        if not queue.fifo and message.deduplication_id is not None:
            message = dataclasses.replace(message, deduplication_id=None)
        if queue.delay_seconds:
            message = dataclasses.replace(message, delay_seconds=queue.delay_seconds)
        per_queue.setdefault(queue.id, (queue, []))[1].append(message)
        if queue.arn == subscription.endpoint:
            answer.delivered += 1

    def _dead_letter_queue(self, subscription: TopicSubscription) -> Queue | None:
        target = subscription.attributes.get("RedrivePolicy")
        if not target:
            return None
        try:
            arn = json.loads(target).get("deadLetterTargetArn")
        except ValueError:
            return None
        return self._queues.find_by_arn_in_transaction(arn) if isinstance(arn, str) else None
