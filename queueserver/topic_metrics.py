"""The topics' families in /metrics, named after CloudWatch's AWS/SNS metrics, labelled by TopicName.

Counted since the server started, per topic, from the tallies a publish bumps (storage/topics.py).
At most `max_topics` topics (the first created) have series of their own; the rest are summed under
topic="(other)", as queues are.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from queueserver.storage.topics import Topics, TopicTally

TOPIC_LABELS = ["topic", "region", "account"]
OTHER = "(other)"  # no topic name has parentheses
# (the topic tally's field, the family, its help).
_TOPIC_COUNTERS = (
    ("published", "queueserver_topic_messages_published", "Messages published to the topic, each batch entry "
     "counted (NumberOfMessagesPublished)."),
    ("publish_bytes", "queueserver_topic_publish_size_bytes", "Bytes published: messages and their attributes "
     "(PublishSize, summed)."),
    ("delivered", "queueserver_topic_notifications_delivered", "Deliveries stored in a subscribed queue "
     "(NumberOfNotificationsDelivered)."),
    ("filtered_out", "queueserver_topic_notifications_filtered_out", "Deliveries a subscription's filter policy "
     "turned away (NumberOfNotificationsFilteredOut)."),
    ("failed", "queueserver_topic_notifications_failed", "Deliveries the subscribed queue would not take "
     "(NumberOfNotificationsFailed)."),
    ("redriven_to_dlq", "queueserver_topic_notifications_redriven_to_dlq", "Failed deliveries stored in the "
     "subscription's dead-letter queue (NumberOfNotificationsRedrivenToDlq)."),
    ("failed_to_redrive_to_dlq", "queueserver_topic_notifications_failed_to_redrive_to_dlq", "Failed deliveries "
     "the subscription's dead-letter queue would not take either (NumberOfNotificationsFailedToRedriveToDlq)."),
)
# The reasons of NumberOfNotificationsFilteredOut-<reason>, each a series of the family below.
FILTER_REASONS = ("MessageAttributes", "MessageBody", "NoMessageAttributes", "InvalidAttributes",
                  "InvalidMessageBody")


def topic_families(topics: Topics, max_topics: int) -> Iterator[Metric]:
    counters = {field: CounterMetricFamily(name, text, labels=TOPIC_LABELS) for field, name, text in _TOPIC_COUNTERS}
    by_reason = CounterMetricFamily("queueserver_topic_notifications_filtered_out_by_reason", "Deliveries a filter "
                                    "policy turned away, by reason (NumberOfNotificationsFilteredOut-<reason>).",
                                    labels=[*TOPIC_LABELS, "reason"])
    tallies = topics.tallies.copy()
    listed = topics.loaded()
    series = [([t.name, t.region, t.account], tallies.get(t.id) or TopicTally()) for t in listed[:max_topics]]
    if len(listed) > max_topics:
        rest = TopicTally()
        for topic in listed[max_topics:]:
            tally = tallies.get(topic.id)
            for field, _, _ in _TOPIC_COUNTERS:
                setattr(rest, field, getattr(rest, field) + (getattr(tally, field) if tally else 0))
            for reason, count in (tally.filtered_out_by.copy().items() if tally else ()):
                rest.filtered_out_by[reason] = rest.filtered_out_by.get(reason, 0) + count
        series.append(([OTHER, "", ""], rest))
    for labels, tally in series:
        for field, family in counters.items():
            family.add_metric(labels, getattr(tally, field))
        reasons = tally.filtered_out_by.copy()
        for reason in FILTER_REASONS:
            by_reason.add_metric([*labels, reason], reasons.get(reason, 0))
    yield from counters.values()
    yield by_reason
