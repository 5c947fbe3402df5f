"""The matrix's second resource: every action that touches two queues is refused to a key denied on either.

test_auth_matrix.py drives every action on one queue. Here each action that reads or writes a second
queue (a move task's destination, or the queues its messages return to; a RedrivePolicy's dead-letter
target, set by CreateQueue or SetQueueAttributes or used by a receive past maxReceiveCount; a
subscription beside its queue; the console's redrive form) runs on fresh queues `tq-a-N` (the queue
acted on) and `tq-b-N` (the second one), as keys of the owner's account whose identity policy allows
`sqs:*` but denies it on the first queue (`deny-first`), on the second (`deny-second`), or on a third
queue the request never touches (`deny-third`). The first two are refused with AccessDenied and nothing
moves; the third is allowed. Both protocols, and the console's forms. The issue's attacks each have a
test of their own at the end: a key denied only ReceiveMessage on a dead-letter queue reading it through
a move task, and one allowed only `mine*` filling `secret-dlq` through a RedrivePolicy.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pytest
from support.auth import SECOND_QUEUE_KEYS as KEYS, access_denied, credentials_toml, signed_call, signed_client
from support.console import Browser
from support.server import Server, start
from support.sqs import receive, redrive_policy

PRINCIPALS = {"deny-first": "AKIDDENYFIRST", "deny-second": "AKIDDENYSECOND", "deny-third": "AKIDDENYTHIRD"}
EXPECTED = {"deny-first": "refused", "deny-second": "refused", "deny-third": "allowed"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("two-queues")
    (folder / "keys.toml").write_text(credentials_toml(KEYS))
    running = start(folder / "q.db", "--credentials", str(folder / "keys.toml"))
    yield running
    assert running.stop() == 0


class Kit:
    """Fresh queues for each case, made by a key no policy limits."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.setup = signed_client("json", endpoint, "AKIDSETUP")
        self._numbers = itertools.count()

    def names(self) -> tuple[str, str]:
        n = next(self._numbers)
        return f"tq-a-{n}", f"tq-b-{n}"

    def queue(self, name: str, **attributes: str) -> str:
        return str(self.setup.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])

    def dead_letters(self, dead: str, source: str, messages: int = 2) -> tuple[str, str]:
        """A dead-letter queue `dead` holding messages dead-lettered from `source`: their URLs."""
        dead_url = self.queue(dead)
        source_url = self.queue(source, RedrivePolicy=redrive_policy(arn(dead_url), 1))
        for i in range(messages):
            self.setup.send_message(QueueUrl=source_url, MessageBody=f"m{i}")
        while receive(self.setup, source_url, MaxNumberOfMessages=10, VisibilityTimeout=0):
            pass  # each message once; the next receive moves them
        return dead_url, source_url

    def count(self, url: str) -> int:
        attributes = self.setup.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def arn(url: str) -> str:
    account, name = url.rsplit("/", 2)[1:]
    return f"arn:aws:sqs:us-east-1:{account}:{name}"


@dataclass
class Case:
    """An action on two queues: its request, and what shows it ran (a check of the queues after)."""

    action: str
    members: dict[str, Any]
    ran: Callable[[], bool]


def _move_to_destination(kit: Kit) -> Case:
    first, second = kit.names()
    dead, _ = kit.dead_letters(first, f"{first}-src")
    destination = kit.queue(second)
    return Case("StartMessageMoveTask", {"SourceArn": arn(dead), "DestinationArn": arn(destination)},
                lambda: kit.count(dead) == 0 or kit.count(destination) > 0)


def _move_back(kit: Kit) -> Case:
    first, second = kit.names()
    dead, source = kit.dead_letters(first, second)  # the messages return to `second`
    return Case("StartMessageMoveTask", {"SourceArn": arn(dead)}, lambda: kit.count(dead) == 0 or kit.count(source) > 0)


def _create_with_dead_letter_queue(kit: Kit) -> Case:
    first, second = kit.names()
    target = kit.queue(second)
    return Case("CreateQueue", {"QueueName": first, "Attributes": {"RedrivePolicy": redrive_policy(arn(target), 1)}},
                lambda: any(url.endswith(f"/{first}") for url in kit.setup.list_queues(QueueNamePrefix=first).get(
                    "QueueUrls", [])))


def _set_dead_letter_queue(kit: Kit) -> Case:
    first, second = kit.names()
    queue, target = kit.queue(first), kit.queue(second)
    return Case("SetQueueAttributes", {"QueueUrl": queue, "Attributes": {
        "RedrivePolicy": redrive_policy(arn(target), 1)}},
        lambda: "RedrivePolicy" in kit.setup.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])[
            "Attributes"])


def _receive_past_max_receive_count(kit: Kit) -> Case:
    first, second = kit.names()
    target = kit.queue(second)
    queue = kit.queue(first, RedrivePolicy=redrive_policy(arn(target), 1))
    kit.setup.send_message(QueueUrl=queue, MessageBody="once")
    receive(kit.setup, queue, VisibilityTimeout=0)  # received once: the next receive moves it
    return Case("ReceiveMessage", {"QueueUrl": queue}, lambda: kit.count(target) == 1)


def _subscribe(kit: Kit) -> Case:
    first, second = kit.names()
    queue = kit.queue(first)
    return Case("QueueserverCreateSubscription", {"QueueUrl": queue, "SubscriptionName": second},
                lambda: len(signed_call("json", kit.endpoint, "AKIDSETUP", "QueueserverListSubscriptions",
                                        {"QueueUrl": queue}).json()["Subscriptions"]) == 1)


CASES: dict[str, Callable[[Kit], Case]] = {
    "move-task-to-its-destination": _move_to_destination,
    "move-task-back-to-the-sources": _move_back,
    "create-queue-with-a-dead-letter-queue": _create_with_dead_letter_queue,
    "set-a-dead-letter-queue": _set_dead_letter_queue,
    "receive-past-max-receive-count": _receive_past_max_receive_count,
    "create-a-subscription": _subscribe,
}
WAYS = ("json", "query-post")


@pytest.fixture(scope="module")
def kit(server: Server) -> Kit:
    return Kit(server.endpoint)


@pytest.mark.parametrize("principal", sorted(PRINCIPALS))
@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_key_denied_on_either_queue_is_refused_and_one_denied_elsewhere_is_not(
        kit: Kit, case: str, way: str, principal: str) -> None:
    made = CASES[case](kit)
    response = signed_call(way, kit.endpoint, PRINCIPALS[principal], made.action, made.members)
    outcome = "allowed" if response.status == 200 else "refused" if access_denied(response) else \
        f"{response.status} {response.body[:300]!r}"
    assert outcome == EXPECTED[principal]
    if outcome == "refused":
        assert not made.ran(), "a refused request changed nothing"
    elif made.action != "StartMessageMoveTask":  # a task runs on after its answer
        assert made.ran()


@pytest.fixture(scope="module")
def browsers(server: Server) -> dict[str, Browser]:
    logged_in = {}
    for principal, key_id in PRINCIPALS.items():
        logged_in[principal] = Browser(server.endpoint)
        assert logged_in[principal].login(key_id, KEYS[key_id]["secret_access_key"]) == (303, "/console/")
    return logged_in


def page(url: str) -> str:
    account, name = url.rsplit("/", 2)[1:]
    return f"/console/queues/us-east-1/{account}/{name}"


def _outcome(status: int, headers: dict[str, str]) -> str:
    location = headers.get("location", "")
    if status == 303 and "notice=" in location and "error=" not in location:
        return "allowed"
    if status in (403, 404) or (status == 303 and "error=AccessDenied" in location):
        return "refused"
    return f"{status} {location}"


@pytest.mark.parametrize("principal", sorted(PRINCIPALS))
def test_the_console_redrive_form_is_refused_to_a_key_denied_on_either_queue(
        kit: Kit, browsers: dict[str, Browser], principal: str) -> None:
    first, second = kit.names()
    dead, source = kit.dead_letters(first, second)
    browser = browsers[principal]
    status, headers, _ = browser.request("POST", page(dead) + "/redrive",
                                         {"csrf_token": browser.cookies["qs_console_csrf"]})
    assert _outcome(status, headers) == EXPECTED[principal]
    if EXPECTED[principal] == "refused":
        assert kit.count(dead) == 2 and kit.count(source) == 0


@pytest.mark.parametrize("principal", sorted(PRINCIPALS))
def test_the_console_send_form_is_refused_to_a_key_denied_on_its_queue_alone(
        kit: Kit, browsers: dict[str, Browser], principal: str) -> None:
    first, _ = kit.names()
    queue = kit.queue(first)
    browser = browsers[principal]
    status, headers, _ = browser.request("POST", page(queue) + "/send",
                                         {"csrf_token": browser.cookies["qs_console_csrf"], "body": "b"})
    # A send touches one queue: only the key denied on it is refused.
    assert _outcome(status, headers) == ("refused" if principal == "deny-first" else "allowed")
    assert kit.count(queue) == (0 if principal == "deny-first" else 1)


# -- the attacks, each as it was made ----------------------------------------------------------------

@pytest.mark.parametrize("way", WAYS)
def test_a_move_task_does_not_read_around_a_deny_of_receive_on_the_dead_letter_queue(kit: Kit, way: str) -> None:
    n = next(kit._numbers)
    dead, source = kit.dead_letters(f"dead-{n}", f"readable-{n}")
    readable = kit.queue(f"readable-copy-{n}")
    for members in ({"SourceArn": arn(dead), "DestinationArn": arn(readable)}, {"SourceArn": arn(dead)}):
        response = signed_call(way, kit.endpoint, "AKIDNOREAD", "StartMessageMoveTask", members)
        assert access_denied(response), response.body[:300]
        assert b"sqs:ReceiveMessage" in response.body
    assert kit.count(dead) == 2 and kit.count(readable) == 0 and kit.count(source) == 0


@pytest.mark.parametrize("way", WAYS)
def test_a_redrive_policy_cannot_fill_a_queue_its_key_may_not_send_to(kit: Kit, way: str) -> None:
    n = next(kit._numbers)
    secret = kit.queue(f"secret-dlq-{n}")
    refused = signed_call(way, kit.endpoint, "AKIDMINE", "SendMessage", {"QueueUrl": secret, "MessageBody": "x"})
    assert access_denied(refused)
    created = signed_call(way, kit.endpoint, "AKIDMINE", "CreateQueue", {
        "QueueName": f"mine-{n}", "Attributes": {"RedrivePolicy": redrive_policy(arn(secret), 1)}})
    assert access_denied(created) and b"sqs:SendMessage" in created.body
    mine = signed_call(way, kit.endpoint, "AKIDMINE", "CreateQueue", {"QueueName": f"mine-{n}"})
    assert mine.status == 200
    url = kit.setup.get_queue_url(QueueName=f"mine-{n}")["QueueUrl"]
    set_later = signed_call(way, kit.endpoint, "AKIDMINE", "SetQueueAttributes", {
        "QueueUrl": url, "Attributes": {"RedrivePolicy": redrive_policy(arn(secret), 1)}})
    assert access_denied(set_later)
    # Its owner's account gave it a dead-letter queue it may not write: receiving cannot move messages there.
    kit.setup.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": redrive_policy(arn(secret), 1)})
    assert signed_call(way, kit.endpoint, "AKIDMINE", "SendMessage", {"QueueUrl": url, "MessageBody": "m"}).status \
        == 200
    for _ in range(2):
        assert access_denied(signed_call(way, kit.endpoint, "AKIDMINE", "ReceiveMessage",
                                         {"QueueUrl": url, "VisibilityTimeout": 0}))
    assert kit.count(secret) == 0 and kit.count(url) == 1



def test_the_console_redrive_form_does_not_read_around_a_deny_of_receive_either(server: Server, kit: Kit) -> None:
    n = next(kit._numbers)
    dead, source = kit.dead_letters(f"dead-{n}", f"readable-{n}")
    browser = Browser(server.endpoint)
    assert browser.login("AKIDNOREAD", KEYS["AKIDNOREAD"]["secret_access_key"]) == (303, "/console/")
    status, headers, _ = browser.request("POST", page(dead) + "/redrive",
                                         {"csrf_token": browser.cookies["qs_console_csrf"]})
    assert _outcome(status, headers) == "refused"
    assert kit.count(dead) == 2 and kit.count(source) == 0


def test_the_console_create_form_cannot_name_a_dead_letter_queue_its_key_may_not_send_to(
        server: Server, kit: Kit) -> None:
    n = next(kit._numbers)
    secret = kit.queue(f"secret-dlq-{n}")
    browser = Browser(server.endpoint)
    assert browser.login("AKIDMINE", KEYS["AKIDMINE"]["secret_access_key"]) == (303, "/console/")
    status, headers, _ = browser.request("POST", "/console/create", {
        "csrf_token": browser.cookies["qs_console_csrf"], "name": f"mine-console-{n}",
        "dead_letter_queue": secret.rsplit("/", 1)[1], "max_receive_count": "1"})
    assert status == 303 and "AccessDenied" in unquote(headers.get("location", "")), (status, headers)
    assert not kit.setup.list_queues(QueueNamePrefix=f"mine-console-{n}").get("QueueUrls")
