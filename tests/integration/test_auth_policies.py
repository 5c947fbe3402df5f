"""Who may do what with credentials on: accounts as namespaces, queue policies, identity policies.

Real boto3 signatures over both protocols; every denial is AccessDenied (403) and changes nothing.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from support.auth import JOBS_QUEUE, OTHER_ACCOUNT, OWNER_ACCOUNT, SignedClock, signed_client
from botocore.exceptions import ClientError
from support.server import Server
from support.sqs import arn_of, visible

ALICE_ARN = f"arn:aws:iam::{OWNER_ACCOUNT}:user/alice"


@pytest.fixture
def bob(auth_server: Server, protocol: str) -> Any:
    """A key of another account."""
    return signed_client(protocol, auth_server.endpoint, "AKIDBOB")


@pytest.fixture
def worker(auth_server: Server, protocol: str) -> Any:
    """Alice's account's key whose identity policy allows receive and delete on the queue "jobs" only."""
    return signed_client(protocol, auth_server.endpoint, "AKIDWORKER")


def denied(call: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("AccessDenied", 403)
    return str(error["Error"]["Message"])


def set_policy(client: Any, url: str, *statements: dict[str, Any]) -> None:
    client.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(
        {"Version": "2012-10-17", "Statement": list(statements)})})


def test_another_accounts_queue_is_denied_then_allowed_by_add_permission_then_denied_by_remove_permission(
        alice, bob, alice_queue_url):
    message = denied(lambda: bob.send_message(QueueUrl=alice_queue_url, MessageBody="not yet"))
    assert message.startswith(f"User: arn:aws:iam::{OTHER_ACCOUNT}:user/bob is not authorized to perform: "
                              f"sqs:SendMessage on resource: {arn_of(alice, alice_queue_url)}")
    assert visible(alice, alice_queue_url) == 0
    alice.add_permission(QueueUrl=alice_queue_url, Label="bob-sends", AWSAccountIds=[OTHER_ACCOUNT],
                         Actions=["SendMessage"])
    bob.send_message(QueueUrl=alice_queue_url, MessageBody="allowed")
    bob.send_message_batch(QueueUrl=alice_queue_url, Entries=[{"Id": "1", "MessageBody": "the batch variant too"}])
    denied(lambda: bob.receive_message(QueueUrl=alice_queue_url))  # only what was granted
    assert visible(alice, alice_queue_url) == 2
    alice.remove_permission(QueueUrl=alice_queue_url, Label="bob-sends")
    denied(lambda: bob.send_message(QueueUrl=alice_queue_url, MessageBody="no longer"))
    assert visible(alice, alice_queue_url) == 2


def test_a_request_repeated_follows_every_change_of_the_queue_policy_on_the_very_next_call(alice, bob, alice_queue_url):
    """Decisions that depend on no condition are remembered between requests: no change may be missed."""
    arn = arn_of(alice, alice_queue_url)
    allow = {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Action": "sqs:SendMessage", "Resource": arn}
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:SendMessage", "Resource": arn}
    for _ in range(2):
        denied(lambda: bob.send_message(QueueUrl=alice_queue_url, MessageBody="not yet"))
        alice.send_message(QueueUrl=alice_queue_url, MessageBody="the owner's")
    set_policy(alice, alice_queue_url, allow)
    for _ in range(2):
        bob.send_message(QueueUrl=alice_queue_url, MessageBody="allowed")
    set_policy(alice, alice_queue_url, allow, deny)
    denied(lambda: bob.send_message(QueueUrl=alice_queue_url, MessageBody="denied again"))
    denied(lambda: alice.send_message(QueueUrl=alice_queue_url, MessageBody="the owner denied too"))
    set_policy(alice, alice_queue_url, allow)
    bob.send_message(QueueUrl=alice_queue_url, MessageBody="allowed again")
    alice.send_message(QueueUrl=alice_queue_url, MessageBody="the owner's again")
    assert visible(alice, alice_queue_url) == 6


def test_each_account_lists_and_creates_only_in_its_own_namespace(alice, bob, alice_queue_url):
    name = alice_queue_url.rsplit("/", 1)[1]
    own = bob.create_queue(QueueName=name)["QueueUrl"]  # the same name is another queue in another account
    assert own.endswith(f"/{OTHER_ACCOUNT}/{name}") and own != alice_queue_url
    assert alice_queue_url not in bob.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
    assert own not in alice.list_queues(QueueNamePrefix=name).get("QueueUrls", [])


def test_a_missing_queue_of_another_account_is_denied_like_an_existing_one(alice, bob, alice_queue_url):
    missing = alice_queue_url.rsplit("/", 1)[0] + "/no-such-queue"
    denied(lambda: bob.send_message(QueueUrl=missing, MessageBody="x"))
    with pytest.raises(ClientError) as caught:
        alice.send_message(QueueUrl=missing, MessageBody="x")
    assert caught.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_hand_written_policy_with_conditions_allows_until_its_date_and_only_from_its_addresses(
        auth_server, alice, bob, alice_queue_url):
    clock = SignedClock(auth_server.endpoint)
    until = datetime.fromtimestamp(clock.advance(0) / 1000, timezone.utc) + timedelta(seconds=60)
    set_policy(alice, alice_queue_url, {
        "Sid": "bob-until", "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{OTHER_ACCOUNT}:root"},
        "Action": "sqs:Send*", "Resource": arn_of(alice, alice_queue_url),
        "Condition": {"DateLessThan": {"aws:CurrentTime": until.strftime("%Y-%m-%dT%H:%M:%SZ")},
                      "IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "127.0.0.0/8"]},
                      "StringEqualsIfExists": {"aws:SourceAccount": "999999999999"}},
    })
    bob.send_message(QueueUrl=alice_queue_url, MessageBody="in time")
    clock.advance(61)
    denied(lambda: bob.send_message(QueueUrl=alice_queue_url, MessageBody="too late"))
    assert visible(alice, alice_queue_url) == 1


def test_a_condition_that_does_not_hold_grants_nothing(alice, bob, alice_queue_url):
    arn = arn_of(alice, alice_queue_url)
    set_policy(alice, alice_queue_url,
               {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": arn,
                "Condition": {"NotIpAddress": {"aws:SourceIp": "127.0.0.0/8"}}},
               {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Action": "sqs:SendMessage", "Resource": arn,
                "Condition": {"Bool": {"aws:SecureTransport": "true"}}})
    denied(lambda: bob.send_message(QueueUrl=alice_queue_url, MessageBody="plain http from loopback"))
    assert visible(alice, alice_queue_url) == 0


def test_an_explicit_deny_wins_over_an_allow_even_for_the_owner(alice, bob, alice_queue_url):
    arn = arn_of(alice, alice_queue_url)
    set_policy(alice, alice_queue_url,
               {"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Resource": arn},
               {"Effect": "Deny", "Principal": {"AWS": [ALICE_ARN, OTHER_ACCOUNT]}, "Action": "sqs:Purge*",
                "Resource": "arn:aws:sqs:*:*:*"})
    alice.send_message(QueueUrl=alice_queue_url, MessageBody="kept")
    message = denied(lambda: alice.purge_queue(QueueUrl=alice_queue_url))
    assert message.endswith("with an explicit deny in a resource-based policy")
    denied(lambda: bob.purge_queue(QueueUrl=alice_queue_url))
    bob.send_message(QueueUrl=alice_queue_url, MessageBody="bob may send")
    assert visible(alice, alice_queue_url) == 2


def test_owner_only_actions_are_never_granted_to_another_account(alice, bob, alice_queue_url):
    set_policy(alice, alice_queue_url, {"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Resource": "*"})
    bob.send_message(QueueUrl=alice_queue_url, MessageBody="sqs:* grants sending")
    denied(lambda: bob.delete_queue(QueueUrl=alice_queue_url))
    denied(lambda: bob.set_queue_attributes(QueueUrl=alice_queue_url, Attributes={"VisibilityTimeout": "5"}))
    denied(lambda: bob.add_permission(QueueUrl=alice_queue_url, Label="self", AWSAccountIds=[OTHER_ACCOUNT],
                                      Actions=["ReceiveMessage"]))
    denied(lambda: bob.tag_queue(QueueUrl=alice_queue_url, Tags={"owner": "bob"}))
    assert alice.get_queue_attributes(QueueUrl=alice_queue_url, AttributeNames=["VisibilityTimeout"])[
        "Attributes"]["VisibilityTimeout"] == "30"
    assert bob.get_queue_url(QueueName=alice_queue_url.rsplit("/", 1)[1],
                             QueueOwnerAWSAccountId=OWNER_ACCOUNT)["QueueUrl"] == alice_queue_url


def test_a_key_restricted_to_one_queue_receives_and_deletes_there_and_nothing_else(alice, worker, alice_queue_url):
    jobs = alice.create_queue(QueueName=JOBS_QUEUE)["QueueUrl"]
    alice.purge_queue(QueueUrl=jobs)
    alice.send_message(QueueUrl=jobs, MessageBody="work")
    assert worker.get_queue_url(QueueName=JOBS_QUEUE)["QueueUrl"] == jobs
    received = worker.receive_message(QueueUrl=jobs)["Messages"]
    worker.delete_message(QueueUrl=jobs, ReceiptHandle=received[0]["ReceiptHandle"])
    message = denied(lambda: worker.send_message(QueueUrl=jobs, MessageBody="not mine to send"))
    assert message.endswith("because no identity-based policy allows the sqs:SendMessage action")
    alice.send_message(QueueUrl=alice_queue_url, MessageBody="another queue")
    denied(lambda: worker.receive_message(QueueUrl=alice_queue_url))
    denied(lambda: worker.purge_queue(QueueUrl=jobs))
    denied(lambda: worker.list_queues())
    denied(lambda: worker.create_queue(QueueName="workers-own"))
    denied(lambda: worker.send_message(QueueUrl=jobs.rsplit("/", 1)[0] + "/missing", MessageBody="x"))
    assert visible(alice, jobs) == 0 and visible(alice, alice_queue_url) == 1


def test_dead_letter_move_tasks_obey_the_same_rules(alice, bob, worker, alice_queue_url):
    dead = alice_queue_url
    dead_arn = arn_of(alice, dead)
    source = alice.create_queue(QueueName=dead.rsplit("/", 1)[1][:70] + "-src", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 1})})["QueueUrl"]
    denied(lambda: worker.start_message_move_task(SourceArn=dead_arn))  # its identity policy leaves it out
    # Even a policy granting everyone everything leaves move tasks to the queue's own account.
    set_policy(alice, dead, {"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Resource": dead_arn})
    denied(lambda: bob.start_message_move_task(SourceArn=dead_arn))
    denied(lambda: bob.list_message_move_tasks(SourceArn=dead_arn))
    handle = alice.start_message_move_task(SourceArn=dead_arn)["TaskHandle"]
    denied(lambda: bob.cancel_message_move_task(TaskHandle=handle))
    assert bob.list_dead_letter_source_queues(QueueUrl=dead)["queueUrls"] == [source]
    # A redrive policy may only name a dead-letter queue of the same account, as on AWS.
    with pytest.raises(ClientError) as caught:
        bob.create_queue(QueueName="bobs-source", Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 1})})
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_the_test_clock_and_the_extension_actions_need_a_signed_request(auth_server, alice, alice_queue_url):
    request = urllib.request.Request(f"{auth_server.endpoint}/_queueserver/clock", method="POST",
                                     data=b'{"advance_seconds": 1}', headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 403
    assert json.loads(caught.value.read())["code"] == "MissingAuthenticationToken"
    caught.value.close()
    browse = urllib.request.Request(f"{auth_server.endpoint}/", method="POST",
                                    data=json.dumps({"QueueUrl": alice_queue_url}).encode(),
                                    headers={"Content-Type": "application/x-amz-json-1.0",
                                             "X-Amz-Target": "AmazonSQS.QueueserverBrowseMessages"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(browse, timeout=10)
    assert caught.value.code == 403
    assert caught.value.headers["x-amzn-query-error"] == "MissingAuthenticationToken;Sender"
    caught.value.close()
