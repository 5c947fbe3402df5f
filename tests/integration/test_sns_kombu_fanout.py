"""kombu's fanout exchange on its SQS transport (Celery's broadcast queues, transport option
`supports_fanout`): it creates an SNS topic, subscribes each consuming queue to it (raw delivery, with
the queue Policy allowing the topic), and publishes through SNS; every consumer gets every message."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from kombu import Connection, Exchange, Queue
from kombu.simple import SimpleQueue
from support.sqs import unique_queue_name


@pytest.fixture
def kombu_connection(server: Any) -> Any:
    with Connection(f"sqs://any:any@{urlsplit(server.endpoint).netloc}",
                    transport_options={"region": "us-east-1", "is_secure": False, "supports_fanout": True,
                                       "wait_time_seconds": 1}) as connection:
        yield connection


def test_a_broadcast_reaches_both_consumers_of_a_fanout_exchange(kombu_connection: Any) -> None:
    name = unique_queue_name("broadcast")[:40]
    exchange = Exchange(name, type="fanout")
    consumers = [SimpleQueue(kombu_connection.channel(), Queue(f"{name}-{who}", exchange=exchange))
                 for who in ("a", "b")]
    for consumer in consumers:  # a consumer's queue is subscribed to the topic when it starts consuming
        with pytest.raises(consumer.Empty):
            consumer.get(block=True, timeout=0.1)
    with kombu_connection.Producer() as producer:
        for n in range(3):
            producer.publish({"n": n}, exchange=exchange, routing_key="", serializer="json")
    for consumer in consumers:
        received = []
        for _ in range(3):
            message = consumer.get(block=True, timeout=20)
            received.append(message.payload["n"])
            message.ack()
        assert sorted(received) == [0, 1, 2]
        consumer.close()
