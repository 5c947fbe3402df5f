"""AWS's 60-second rules, on a server started with --enforce-cooldowns."""

from __future__ import annotations

import pytest
from support.server import ClockControl
from support.sqs import raises_modeled, unique_queue_name

pytestmark = pytest.mark.server_process


@pytest.fixture
def strict(cooldown_server, make_client):
    return make_client(cooldown_server.endpoint)


@pytest.fixture
def strict_clock(cooldown_server):
    return ClockControl(cooldown_server.endpoint)


def test_recreating_a_queue_within_60_seconds_of_deleting_it_fails(strict, strict_clock):
    name = unique_queue_name("deleted-recently")
    url = strict.create_queue(QueueName=name)["QueueUrl"]
    strict.delete_queue(QueueUrl=url)
    with raises_modeled(strict, "QueueDeletedRecently"):
        strict.create_queue(QueueName=name)
    strict_clock.advance(30)
    with raises_modeled(strict, "QueueDeletedRecently"):
        strict.create_queue(QueueName=name)
    strict_clock.advance(31)
    assert strict.create_queue(QueueName=name)["QueueUrl"] == url


def test_a_recently_deleted_queue_does_not_exist_for_other_actions(strict):
    name = unique_queue_name("deleted-recently")
    url = strict.create_queue(QueueName=name)["QueueUrl"]
    strict.delete_queue(QueueUrl=url)
    with raises_modeled(strict, "QueueDoesNotExist"):
        strict.get_queue_url(QueueName=name)
    with raises_modeled(strict, "QueueDoesNotExist"):
        strict.send_message(QueueUrl=url, MessageBody="x")


def test_the_delete_cooldown_is_per_queue_name(strict):
    gone = strict.create_queue(QueueName=unique_queue_name("gone"))["QueueUrl"]
    strict.delete_queue(QueueUrl=gone)
    strict.create_queue(QueueName=unique_queue_name("other"))


def test_a_second_purge_within_60_seconds_fails_with_purge_queue_in_progress(
        strict, strict_clock):
    url = strict.create_queue(QueueName=unique_queue_name("purge"))["QueueUrl"]
    strict.send_message(QueueUrl=url, MessageBody="x")
    strict.purge_queue(QueueUrl=url)
    with raises_modeled(strict, "PurgeQueueInProgress"):
        strict.purge_queue(QueueUrl=url)
    strict_clock.advance(61)
    strict.purge_queue(QueueUrl=url)


def test_a_refused_purge_leaves_messages_sent_after_the_first_purge(strict, strict_clock):
    url = strict.create_queue(QueueName=unique_queue_name("purge"))["QueueUrl"]
    strict.purge_queue(QueueUrl=url)
    strict_clock.advance(1)
    strict.send_message(QueueUrl=url, MessageBody="after the purge")
    with raises_modeled(strict, "PurgeQueueInProgress"):
        strict.purge_queue(QueueUrl=url)
    attrs = strict.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "1"


def test_the_purge_cooldown_is_per_queue(strict):
    a = strict.create_queue(QueueName=unique_queue_name("purge-a"))["QueueUrl"]
    b = strict.create_queue(QueueName=unique_queue_name("purge-b"))["QueueUrl"]
    strict.purge_queue(QueueUrl=a)
    strict.purge_queue(QueueUrl=b)


def test_a_queue_created_after_a_purged_queue_is_deleted_may_be_purged_at_once(strict):
    """The new queue may reuse the deleted one's row id; the purge cooldown belongs to the deleted queue."""
    purged = strict.create_queue(QueueName=unique_queue_name("purged-then-deleted"))["QueueUrl"]
    strict.purge_queue(QueueUrl=purged)
    strict.delete_queue(QueueUrl=purged)
    fresh = strict.create_queue(QueueName=unique_queue_name("fresh"))["QueueUrl"]
    strict.purge_queue(QueueUrl=fresh)  # never purged before: no PurgeQueueInProgress
