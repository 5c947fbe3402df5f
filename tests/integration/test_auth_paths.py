"""Every path to a message is one authorization rule: browsing and subscriptions that copy a queue need
sqs:ReceiveMessage, a subscription is covered by its queue's Policy, subscriptions are the queue owner's,
and a move task is authorized to send wherever its messages go. Real signatures, both protocols."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.auth import OTHER_ACCOUNT, OWNER_ACCOUNT, access_denied, signed_call, signed_client
from support.server import Server, wait_for
from support.sqs import arn_of, counts, receive, redrive_policy, visible
from support.wire import RawResponse

ALICE_ARN = f"arn:aws:iam::{OWNER_ACCOUNT}:user/alice"
CREATE = "QueueserverCreateSubscription"
DELETE = "QueueserverDeleteSubscription"


@pytest.fixture
def bob(auth_server: Server, protocol: str) -> Any:
    return signed_client(protocol, auth_server.endpoint, "AKIDBOB")


def extension(auth_server: Server, protocol: str, key_id: str, action: str, **members: str) -> RawResponse:
    """An extension action signed with `key_id`, over the test's protocol (a Query form POST for "query")."""
    return signed_call("json" if protocol == "json" else "query-post", auth_server.endpoint, key_id, action, members)


def subscription_url(response: RawResponse) -> str:
    assert response.status == 200, response.body
    if response.headers["content-type"].startswith("application/x-amz-json"):
        return str(response.json()["SubscriptionUrl"])
    return str(response.text(f"{CREATE}Result/SubscriptionUrl"))


def browsed_bodies(response: RawResponse) -> list[str]:
    assert response.status == 200, response.body
    if response.headers["content-type"].startswith("application/x-amz-json"):
        return [m["Body"] for m in response.json()["Messages"]]
    return response.texts("QueueserverBrowseMessagesResult/Message/Body")


def set_policy(client: Any, url: str, *statements: dict[str, Any]) -> None:
    client.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(
        {"Version": "2012-10-17", "Statement": list(statements)})})


def denied(call: Any) -> None:
    with pytest.raises(ClientError) as caught:
        call()
    assert (caught.value.response["Error"]["Code"], caught.value.response["ResponseMetadata"]["HTTPStatusCode"]) \
        == ("AccessDenied", 403)


def subscription_names(alice: Any, auth_server: Server, protocol: str, queue_url: str) -> list[str]:
    response = extension(auth_server, protocol, "AKIDALICE", "QueueserverListSubscriptions", QueueUrl=queue_url)
    assert response.status == 200, response.body
    if protocol == "json":
        return [s["SubscriptionName"] for s in response.json()["Subscriptions"]]
    return response.texts("QueueserverListSubscriptionsResult/Subscription/SubscriptionName")


@pytest.mark.parametrize("principal", ["other", "owner"])
def test_a_deny_of_receive_message_also_refuses_browsing_and_a_subscription_that_copies_the_queue(
        auth_server, protocol, alice, alice_queue_url, principal):
    arn = arn_of(alice, alice_queue_url)
    key_id, principal_arn = ("AKIDBOB", OTHER_ACCOUNT) if principal == "other" else ("AKIDALICE", ALICE_ARN)
    set_policy(alice, alice_queue_url,
               {"Effect": "Allow", "Principal": {"AWS": principal_arn}, "Resource": arn,
                "Action": ["sqs:*", f"sqs:{CREATE}"]},
               {"Effect": "Deny", "Principal": {"AWS": principal_arn}, "Action": "sqs:ReceiveMessage", "Resource": arn})
    alice.send_message_batch(QueueUrl=alice_queue_url, Entries=[{"Id": str(i), "MessageBody": f"secret {i}"}
                                                               for i in range(2)])
    client = signed_client(protocol, auth_server.endpoint, key_id)
    denied(lambda: client.receive_message(QueueUrl=alice_queue_url))
    assert access_denied(extension(auth_server, protocol, key_id, "QueueserverBrowseMessages",
                                   QueueUrl=alice_queue_url))
    assert access_denied(extension(auth_server, protocol, key_id, CREATE, QueueUrl=alice_queue_url,
                                   SubscriptionName="copy", StartFrom="all"))
    assert subscription_names(alice, auth_server, protocol, alice_queue_url) == []
    assert counts(alice, alice_queue_url).visible == 2  # nothing was received either

    # A subscription of new messages reads no body the queue holds: the Deny leaves it, and holds on it.
    url = subscription_url(extension(auth_server, protocol, key_id, CREATE, QueueUrl=alice_queue_url,
                                     SubscriptionName="later"))
    assert url == f"{alice_queue_url}~later"
    alice.send_message(QueueUrl=alice_queue_url, MessageBody="sent after")
    denied(lambda: client.receive_message(QueueUrl=url))
    assert access_denied(extension(auth_server, protocol, key_id, "QueueserverBrowseMessages", QueueUrl=url))
    assert counts(alice, url).visible == 1


def test_a_subscription_is_covered_by_the_allows_and_denies_of_its_queues_policy(
        auth_server, protocol, alice, bob, alice_queue_url):
    arn = arn_of(alice, alice_queue_url)
    url = subscription_url(extension(auth_server, protocol, "AKIDALICE", CREATE, QueueUrl=alice_queue_url,
                                     SubscriptionName="audit"))
    alice.send_message(QueueUrl=alice_queue_url, MessageBody="one")
    denied(lambda: bob.receive_message(QueueUrl=url))  # no grant on the queue: none on its subscription

    grant = {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Resource": arn,
             "Action": ["sqs:ReceiveMessage", "sqs:GetQueueAttributes"]}
    set_policy(alice, alice_queue_url, grant)
    assert [m["Body"] for m in receive(bob, url, VisibilityTimeout=0)] == ["one"]
    set_policy(alice, alice_queue_url, grant, {"Effect": "Deny", "Principal": "*", "Resource": arn,
                                               "Action": "sqs:ReceiveMessage"})
    denied(lambda: bob.receive_message(QueueUrl=url))
    denied(lambda: alice.receive_message(QueueUrl=url))  # a Deny for everyone covers the owner too

    # A statement about the subscription alone grants that subscription, not its queue.
    set_policy(alice, alice_queue_url, {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT},
                                        "Resource": f"{arn}~audit", "Action": "sqs:ReceiveMessage"})
    assert [m["Body"] for m in receive(bob, url)] == ["one"]
    denied(lambda: bob.receive_message(QueueUrl=alice_queue_url))

    # It has no Policy of its own to say otherwise.
    with pytest.raises(ClientError) as caught:
        alice.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps({"Statement": []})})
    assert caught.value.response["Error"]["Code"] == "InvalidAttributeValue"
    with pytest.raises(ClientError) as caught:
        alice.add_permission(QueueUrl=url, Label="x", AWSAccountIds=[OTHER_ACCOUNT], Actions=["ReceiveMessage"])
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_another_account_creates_or_deletes_subscriptions_only_where_the_policy_names_the_action(
        auth_server, protocol, alice, alice_queue_url):
    arn = arn_of(alice, alice_queue_url)
    alice_sub = subscription_url(extension(auth_server, protocol, "AKIDALICE", CREATE, QueueUrl=alice_queue_url,
                                           SubscriptionName="owners"))
    for granted in (["sqs:*"], ["sqs:Queueserver*"], ["sqs:*Subscription"]):  # wildcards do not grant it
        set_policy(alice, alice_queue_url, {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT},
                                            "Resource": arn, "Action": granted})
        assert access_denied(extension(auth_server, protocol, "AKIDBOB", CREATE, QueueUrl=alice_queue_url,
                                       SubscriptionName="bobs"))
        assert access_denied(extension(auth_server, protocol, "AKIDBOB", DELETE, SubscriptionUrl=alice_sub))
    assert subscription_names(alice, auth_server, protocol, alice_queue_url) == ["owners"]

    set_policy(alice, alice_queue_url, {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Resource": arn,
                                        "Action": ["sqs:*", f"sqs:{CREATE.lower()}", f"sqs:{DELETE}"]})
    bobs = subscription_url(extension(auth_server, protocol, "AKIDBOB", CREATE, QueueUrl=alice_queue_url,
                                      SubscriptionName="bobs"))
    assert bobs == f"{alice_queue_url}~bobs"  # the owner's account: the queue's, not the caller's
    assert f"/{OWNER_ACCOUNT}/" in bobs and f"/{OTHER_ACCOUNT}/" not in bobs
    assert sorted(subscription_names(alice, auth_server, protocol, alice_queue_url)) == ["bobs", "owners"]
    assert extension(auth_server, protocol, "AKIDBOB", DELETE, SubscriptionUrl=alice_sub).status == 200
    assert subscription_names(alice, auth_server, protocol, alice_queue_url) == ["bobs"]
    # An explicit Deny of it wins over the statement naming it.
    set_policy(alice, alice_queue_url,
               {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Resource": arn, "Action": f"sqs:{DELETE}"},
               {"Effect": "Deny", "Principal": "*", "Resource": arn, "Action": "sqs:Queueserver*"})
    assert access_denied(extension(auth_server, protocol, "AKIDBOB", DELETE, SubscriptionUrl=bobs))


def _dead_letters(alice: Any, dead_letter_url: str, source_name: str, bodies: list[str]) -> str:
    """A source queue of `dead_letter_url` whose messages `bodies` were dead-lettered into it; its URL."""
    source = alice.create_queue(QueueName=source_name, Attributes={
        "RedrivePolicy": redrive_policy(arn_of(alice, dead_letter_url), 1)})["QueueUrl"]
    alice.send_message_batch(QueueUrl=source, Entries=[{"Id": str(i), "MessageBody": b}
                                                       for i, b in enumerate(bodies)])
    assert len(receive(alice, source, MaxNumberOfMessages=10, VisibilityTimeout=0)) == len(bodies)
    assert receive(alice, source, MaxNumberOfMessages=10) == []  # past maxReceiveCount: moved
    return str(source)


def test_a_move_task_without_a_destination_is_authorized_to_send_to_every_queue_its_messages_return_to(
        auth_server, protocol, alice, request):
    redriver = signed_client(protocol, auth_server.endpoint, "AKIDREDRIVER")  # may send only to `*-back` queues
    prefix = f"mv-{request.node.callspec.id}"
    dead = alice.create_queue(QueueName=f"{prefix}-dlq")["QueueUrl"]
    dead_arn = arn_of(alice, dead)
    source = _dead_letters(alice, dead, f"{prefix}-src", ["a", "b"])
    denied(lambda: redriver.start_message_move_task(SourceArn=dead_arn))  # the default destination: the source
    denied(lambda: redriver.start_message_move_task(SourceArn=dead_arn, DestinationArn=arn_of(alice, source)))
    assert visible(alice, dead) == 2 and visible(alice, source) == 0

    # The source stops naming the dead-letter queue: its messages there still go back to it.
    alice.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": ""})
    back = _dead_letters(alice, dead, f"{prefix}-back", ["c"])
    denied(lambda: redriver.start_message_move_task(SourceArn=dead_arn))
    assert redriver.list_message_move_tasks(SourceArn=dead_arn)["Results"] == []
    alice.purge_queue(QueueUrl=dead)
    _dead_letters(alice, dead, f"{prefix}-back", ["d"])
    redriver.start_message_move_task(SourceArn=dead_arn)  # every message returns to a queue it may send to
    wait_for(lambda: visible(alice, back) == 1 and visible(alice, dead) == 0, "the move to end")
    assert visible(alice, source) == 0
