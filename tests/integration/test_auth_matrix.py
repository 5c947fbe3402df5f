"""Every action, every way in, every kind of principal: allowed or refused as the door's table says.

The cases are generated from the server's own tables: the actions from the dispatch table
(`queueserver.protocol.dispatch.ACTIONS`: the 23 SQS actions and the 4 queueserver extensions), the
expected rule of each from the door's declaration (`queueserver.auth.door.SQS_RULES`, which docs/security.md's
"Who may run each action" table shows), the console's forms from
`queueserver.console.actions.FORM_ACTIONS` (and its create form), the admin CLI's commands from
`queueserver.admin_cli.COMMANDS`. An action with no row in that table, no request here, or a form or
command the matrix does not drive fails `test_every_action_form_and_command_has_a_rule_and_a_request`.

The ways in: the four signed wire ways (JSON, Query form POST, Query GET signed in its Authorization
header, presigned Query GET) for every action, four tampered ways for every action, the console form where
the console offers one, the admin CLI command where it offers one. The tampered ways change what was
signed, or add what was not: a presigned GET of a harmless action replayed with the action's
`X-Amz-Target` and JSON body added; a JSON request whose signature leaves out the `Content-Type` it
sends; a signed JSON request whose `Host` is changed afterwards; a signed JSON request with
`X-Forwarded-For`/`X-Forwarded-Proto` added (no proxy is trusted). The first three are refused for every
principal by the signature's own error (never AccessDenied, never run); the last is answered exactly as
the untampered JSON way. The principals: the queue's owner (Alice); another account without a
grant (Bob); another account the queue's Policy grants `sqs:*` and both subscription actions by name but
denies `sqs:ReceiveMessage` (Eve); a key of the owner's account whose identity policy denies `sqs:*` and
`queueserver:*` (Mallory).

Size: 27 actions x (4 signed + 4 tampered ways) + 8 console forms + 12 CLI commands = 236 ways in,
x 4 principals = 944 cases, one server for the module.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import wire
from support.auth import (KEYS, OTHER_ACCOUNT, OWNER_ACCOUNT, THIRD_ACCOUNT, WAYS, access_denied, json_request,
                          presign, sign, sign_only, signed_call, signed_client)
from support.console import Browser
from support.server import Server
from support.sqs import receive, redrive_policy

from queueserver.admin_cli import COMMANDS
from queueserver.auth import door
from queueserver.cli import main as cli_main
from queueserver.console.actions import FORM_ACTIONS
from queueserver.protocol.dispatch import ACTIONS

PRINCIPALS = {"owner": "AKIDALICE", "stranger": "AKIDBOB", "granted-but-receive-denied": "AKIDEVE",
              "identity-denied": "AKIDMALLORY"}
# Every queue the matrix makes: Eve's account may do all a queue Policy can grant, by name too, but read no body.
MATRIX_POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Sid": "third", "Effect": "Allow", "Principal": {"AWS": THIRD_ACCOUNT}, "Resource": "*",
     "Action": ["sqs:*", "sqs:QueueserverCreateSubscription", "sqs:QueueserverDeleteSubscription"]},
    {"Sid": "no-bodies", "Effect": "Deny", "Principal": {"AWS": THIRD_ACCOUNT}, "Resource": "*",
     "Action": "sqs:ReceiveMessage"}]})


# -- the declared rules ----------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    required: tuple[str, ...]  # what the policies must allow
    another_account: str  # "own", "granted", "named" or "never"


_ANOTHER_ACCOUNT = {door.OWN: "own", door.GRANTED: "granted", door.NAMED: "named", door.NEVER: "never"}


def declared_rules() -> dict[str, Rule]:
    """The door's rule of each action (docs/security.md's table is made from it): every IAM action it needs
    on any resource of the requests here (they set StartFrom=all, and name no dead-letter queue)."""
    return {action: Rule(tuple(a for need in rule.needs for a in need.actions), _ANOTHER_ACCOUNT[rule.another_account])
            for action, rule in door.SQS_RULES.items()}


RULES = declared_rules()


def allowed(rule: Rule, principal: str) -> bool:
    """What the documented rules say of this principal."""
    if principal == "owner":
        return True
    if principal == "identity-denied":  # an explicit Deny in either policy wins
        return False
    if rule.another_account == "own":
        return True
    if principal == "stranger":
        return False
    return rule.another_account != "never" and "sqs:ReceiveMessage" not in rule.required


# -- what each action needs, and its request ---------------------------------------------------

class Kit:
    """Alice's queues, messages, subscriptions and move tasks, made fresh for each case."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.alice = signed_client("json", endpoint, "AKIDALICE")
        self._numbers = itertools.count()

    def name(self, hint: str) -> str:
        return f"mx-{hint}-{next(self._numbers)}"

    def queue(self, hint: str = "q") -> str:
        return str(self.alice.create_queue(QueueName=self.name(hint), Attributes={"Policy": MATRIX_POLICY})[
            "QueueUrl"])

    def held(self, url: str) -> str:
        """The receipt handle of a message Alice received (and holds) from the queue."""
        self.alice.send_message(QueueUrl=url, MessageBody="held")
        return str(receive(self.alice, url, VisibilityTimeout=600)[0]["ReceiptHandle"])

    def subscription(self, url: str) -> str:
        response = signed_call("json", self.endpoint, "AKIDALICE", "QueueserverCreateSubscription",
                               {"QueueUrl": url, "SubscriptionName": "sub"})
        assert response.status == 200, response.body
        return str(response.json()["SubscriptionUrl"])

    def dead_letter_queue(self, messages: int = 1) -> str:
        """A dead-letter queue holding `messages` dead-lettered from a source queue of Alice's."""
        dead = self.queue("dlq")
        source = self.alice.create_queue(QueueName=self.name("src"), Attributes={
            "RedrivePolicy": redrive_policy(arn(dead), 1)})["QueueUrl"]
        for start in range(0, messages, 10):
            self.alice.send_message_batch(QueueUrl=source, Entries=[
                {"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, min(messages, start + 10))])
        while receive(self.alice, source, MaxNumberOfMessages=10, VisibilityTimeout=0):
            pass  # each message once; the next receive finds them past maxReceiveCount and moves them
        return dead

    def running_task(self) -> tuple[str, str]:
        """A dead-letter queue and the handle of a move task on it that runs for a while (one message a second)."""
        dead = self.dead_letter_queue(messages=30)
        return dead, str(self.alice.start_message_move_task(SourceArn=arn(dead), MaxNumberOfMessagesPerSecond=1)[
            "TaskHandle"])


def arn(url: str) -> str:
    account, name = url.rsplit("/", 2)[1:]
    return f"arn:aws:sqs:us-east-1:{account}:{name}"


def on_queue(make: Callable[[str], dict[str, Any]]) -> Callable[[Kit], dict[str, Any]]:
    """Members of an action on a fresh queue of Alice's."""
    return lambda kit: make(kit.queue())


def with_handle(make: Callable[[str, str], dict[str, Any]]) -> Callable[[Kit], dict[str, Any]]:
    """Members of an action on a message Alice holds."""
    def members(kit: Kit) -> dict[str, Any]:
        url = kit.queue()
        return make(url, kit.held(url))
    return members


def _permission_to_remove(kit: Kit) -> dict[str, Any]:
    url = kit.queue()
    kit.alice.add_permission(QueueUrl=url, Label="matrix", AWSAccountIds=[OTHER_ACCOUNT], Actions=["SendMessage"])
    return {"QueueUrl": url, "Label": "matrix"}


# The JSON-shaped members of one request of each action, on state made for it.
REQUESTS: dict[str, Callable[[Kit], dict[str, Any]]] = {
    "CreateQueue": lambda kit: {"QueueName": kit.name("new")},
    "ListQueues": lambda kit: {"QueueNamePrefix": "mx-none"},
    "GetQueueUrl": on_queue(lambda url: {"QueueName": url.rsplit("/", 1)[1], "QueueOwnerAWSAccountId": OWNER_ACCOUNT}),
    "GetQueueAttributes": on_queue(lambda url: {"QueueUrl": url, "AttributeNames": ["All"]}),
    "SetQueueAttributes": on_queue(lambda url: {"QueueUrl": url, "Attributes": {"VisibilityTimeout": "31"}}),
    "DeleteQueue": on_queue(lambda url: {"QueueUrl": url}),
    "PurgeQueue": on_queue(lambda url: {"QueueUrl": url}),
    "TagQueue": on_queue(lambda url: {"QueueUrl": url, "Tags": {"team": "matrix"}}),
    "UntagQueue": on_queue(lambda url: {"QueueUrl": url, "TagKeys": ["team"]}),
    "ListQueueTags": on_queue(lambda url: {"QueueUrl": url}),
    "AddPermission": on_queue(lambda url: {"QueueUrl": url, "Label": "matrix", "AWSAccountIds": [OTHER_ACCOUNT],
                                           "Actions": ["SendMessage"]}),
    "RemovePermission": _permission_to_remove,
    "SendMessage": on_queue(lambda url: {"QueueUrl": url, "MessageBody": "m"}),
    "SendMessageBatch": on_queue(lambda url: {"QueueUrl": url, "Entries": [{"Id": "1", "MessageBody": "m"}]}),
    "ReceiveMessage": on_queue(lambda url: {"QueueUrl": url}),
    "DeleteMessage": with_handle(lambda url, handle: {"QueueUrl": url, "ReceiptHandle": handle}),
    "DeleteMessageBatch": with_handle(lambda url, handle: {"QueueUrl": url, "Entries": [
        {"Id": "1", "ReceiptHandle": handle}]}),
    "ChangeMessageVisibility": with_handle(lambda url, handle: {"QueueUrl": url, "ReceiptHandle": handle,
                                                                "VisibilityTimeout": 5}),
    "ChangeMessageVisibilityBatch": with_handle(lambda url, handle: {"QueueUrl": url, "Entries": [
        {"Id": "1", "ReceiptHandle": handle, "VisibilityTimeout": 5}]}),
    "ListDeadLetterSourceQueues": on_queue(lambda url: {"QueueUrl": url}),
    "StartMessageMoveTask": lambda kit: {"SourceArn": arn(kit.dead_letter_queue())},
    "ListMessageMoveTasks": on_queue(lambda url: {"SourceArn": arn(url)}),
    "CancelMessageMoveTask": lambda kit: {"TaskHandle": kit.running_task()[1]},
    "QueueserverBrowseMessages": on_queue(lambda url: {"QueueUrl": url}),
    "QueueserverCreateSubscription": on_queue(lambda url: {"QueueUrl": url, "SubscriptionName": "copy",
                                                           "StartFrom": "all"}),
    "QueueserverDeleteSubscription": lambda kit: {"SubscriptionUrl": kit.subscription(kit.queue())},
    "QueueserverListSubscriptions": on_queue(lambda url: {"QueueUrl": url}),
}


def page(url: str) -> str:
    account, name = url.rsplit("/", 2)[1:]
    return f"/console/queues/us-east-1/{account}/{name}"


def _cancel_form(kit: Kit) -> tuple[str, dict[str, str]]:
    dead, handle = kit.running_task()
    return page(dead) + "/cancel", {"task_handle": handle}


def _confirmed(form: str) -> Callable[[Kit], tuple[str, dict[str, str]]]:
    def made(kit: Kit) -> tuple[str, dict[str, str]]:
        url = kit.queue()
        return page(url) + f"/{form}", {"confirm": url.rsplit("/", 1)[1]}
    return made


# The console's form of each action it offers: (path, fields).
CONSOLE: dict[str, Callable[[Kit], tuple[str, dict[str, str]]]] = {
    "CreateQueue": lambda kit: ("/console/create", {"name": kit.name("new")}),
    "SendMessage": lambda kit: (page(kit.queue()) + "/send", {"body": "m"}),
    "PurgeQueue": _confirmed("purge"),
    "DeleteQueue": _confirmed("delete"),
    "QueueserverDeleteSubscription": lambda kit: (page(kit.subscription(kit.queue())) + "/delete", {"confirm": "sub"}),
    "QueueserverCreateSubscription": lambda kit: (page(kit.queue()) + "/subscribe",
                                                  {"subscription": "copy", "start_from": "all"}),
    "StartMessageMoveTask": lambda kit: (page(kit.dead_letter_queue()) + "/redrive", {}),
    "CancelMessageMoveTask": _cancel_form,
}

# The admin CLI's command of each action it offers: (the command, its arguments). `stats` lists queues as
# `queues` does, and `copy` is ReceiveMessage, SendMessage and DeleteMessage, each signed as the others are
# (its two queues may be on two endpoints): neither is run again.
CLI: dict[str, tuple[str, Callable[[Kit], list[str]]]] = {
    "ListQueues": ("queues", lambda kit: ["--prefix", "mx-none"]),
    "CreateQueue": ("queue", lambda kit: ["create", kit.name("new")]),
    "DeleteQueue": ("queue", lambda kit: ["delete", kit.queue()]),
    "PurgeQueue": ("queue", lambda kit: ["purge", kit.queue()]),
    "SetQueueAttributes": ("queue", lambda kit: ["attributes", kit.queue(), "--set", "VisibilityTimeout=31"]),
    "SendMessage": ("send", lambda kit: [kit.queue(), "m"]),
    "ReceiveMessage": ("receive", lambda kit: [kit.queue()]),
    "QueueserverBrowseMessages": ("peek", lambda kit: [kit.queue()]),
    "StartMessageMoveTask": ("redrive", lambda kit: [kit.dead_letter_queue(), "--interval", "0.05"]),
    "QueueserverCreateSubscription": ("subscription", lambda kit: ["create", kit.queue(), "copy", "--start-from",
                                                                   "all"]),
    "QueueserverDeleteSubscription": ("subscription", lambda kit: ["delete", kit.subscription(kit.queue())]),
    "QueueserverListSubscriptions": ("subscriptions", lambda kit: [kit.queue()]),
}
# topics and publish speak SNS, whose authorization has tests of its own (test_sns_auth.py).
CLI_NOT_RUN = {"stats", "copy", "topics", "publish"}

# The ways in: the signed wire ways of support.auth.WAYS, the tampered ways, the console, the CLI.
CONSOLE_WAY, CLI_WAY = "console", "cli"
FORWARDED = "forwarded"  # answered as the JSON way: the added headers count for nothing
TAMPERED = ("target-added", "content-type-unsigned", "host-changed", FORWARDED)
SIGNATURE_ERRORS = {"IncompleteSignature", "SignatureDoesNotMatch"}


def ways_of(action: str) -> list[str]:
    return [*WAYS, *TAMPERED, *([CONSOLE_WAY] if action in CONSOLE else []), *([CLI_WAY] if action in CLI else [])]


def tampered_call(way: str, endpoint: str, key_id: str, action: str, members: dict[str, Any]) -> wire.RawResponse:
    """One request of `action` signed with `key_id` and then tampered with the way `way` (one of TAMPERED)."""
    if way == "target-added":  # the replay: what runs must not come from an unsigned header
        url = presign(f"{endpoint.rstrip('/')}/?Action=ListQueues&Version=2012-11-05", key_id, 300)
        return wire.send(url, "GET", json.dumps(members).encode(), {
            "X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"})
    request = json_request(endpoint, action, members)
    added: dict[str, str] = {}
    if way == "content-type-unsigned":
        sign_only(request, key_id, {"host", "x-amz-date", "x-amz-target"})
    else:
        sign(request, key_id)
        added = {"Host": "evil.example:1"} if way == "host-changed" else {
            "X-Forwarded-For": "10.9.9.9", "X-Forwarded-Proto": "https"}
    return wire.send(request.url, request.method, request.body, {**dict(request.headers.items()), **added})


CASES = [(action, way, principal) for action in sorted(ACTIONS) for way in ways_of(action) for principal in PRINCIPALS]


# -- the tests -----------------------------------------------------------------------------------

@dataclass
class Matrix:
    kit: Kit
    browsers: dict[str, Browser]


@pytest.fixture(scope="module")
def matrix(auth_server: Server) -> Iterator[Matrix]:
    browsers = {}
    for principal, key_id in PRINCIPALS.items():
        browsers[principal] = Browser(auth_server.endpoint)
        assert browsers[principal].login(key_id, KEYS[key_id]["secret_access_key"]) == (303, "/console/")
    yield Matrix(Kit(auth_server.endpoint), browsers)


def test_the_docstring_states_the_size_of_the_matrix() -> None:
    assert __doc__ is not None and f"= {len(CASES)} cases" in __doc__
    assert f"{len(ACTIONS)} actions x ({len(WAYS)} signed + {len(TAMPERED)} tampered ways) + {len(CONSOLE)} " \
           f"console forms + {len(CLI)} CLI commands" in __doc__ and f"x {len(PRINCIPALS)} principals" in __doc__


def test_every_action_form_and_command_has_a_rule_and_a_request() -> None:
    assert sorted(set(ACTIONS) - set(RULES)) == [], "actions the door declares no rule for"
    assert sorted(set(RULES) - set(ACTIONS)) == [], "rules in the door for actions the server does not have"
    assert sorted(set(ACTIONS) ^ set(REQUESTS)) == [], "actions without a request here (or requests of none)"
    offered = {action for pair in FORM_ACTIONS.values() for action in pair if action} | {"CreateQueue"}
    assert sorted(offered ^ set(CONSOLE)) == [], "console forms the matrix does not post (or posts that none offers)"
    run = {command for command, _ in CLI.values()}
    assert sorted(set(COMMANDS) ^ (run | CLI_NOT_RUN)) == [], "admin commands the matrix does not run"


def _console_outcome(status: int, headers: dict[str, str]) -> str:
    """ "allowed" (redirected with a notice), "refused" (403, the missing page's 404, or SQS's AccessDenied
    shown), or what else came back."""
    location = headers.get("location", "")
    if status == 303 and "notice=" in location and "error=" not in location:
        return "allowed"
    if status in (403, 404) or (status == 303 and "error=AccessDenied" in location):
        return "refused"
    return f"{status} {location}"


def _cli(kit: Kit, args: list[str], key_id: str, monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The admin CLI's own main, signing with `key_id` as boto3 finds keys (the environment): exit code, stderr."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEYS[key_id]["secret_access_key"])
    monkeypatch.setenv("AWS_CONFIG_FILE", str(Path("/nonexistent/aws-config")))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(Path("/nonexistent/aws-credentials")))
    capsys.readouterr()
    code = cli_main([*args, "--endpoint", kit.endpoint, "--region", "us-east-1", "--json"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("action,way,principal", CASES, ids=[f"{a}-{w}-{p}" for a, w, p in CASES])
def test_each_way_in_allows_or_refuses_each_principal_as_the_readme_says(
        matrix: Matrix, action: str, way: str, principal: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    rule = RULES.get(action)
    assert rule is not None, f"the door declares no rule for {action}"
    expected = "allowed" if allowed(rule, principal) else "refused"
    key_id = PRINCIPALS[principal]
    kit = matrix.kit
    if way == CONSOLE_WAY:
        path, fields = CONSOLE[action](kit)
        browser = matrix.browsers[principal]
        status, headers, body = browser.request("POST", path, {"csrf_token": browser.cookies["qs_console_csrf"],
                                                               **fields})
        assert _console_outcome(status, headers) == expected, (status, headers.get("location"), body[:300])
    elif way == CLI_WAY:
        command, arguments = CLI[action]
        code, stderr = _cli(kit, [command, *arguments(kit)], key_id, monkeypatch, capsys)
        assert ("allowed" if code == 0 else "refused" if code == 1 and "AccessDenied" in stderr else
                f"exit {code}: {stderr}") == expected
    elif way in TAMPERED and way != FORWARDED:
        response = tampered_call(way, kit.endpoint, key_id, action, REQUESTS[action](kit))
        assert response.status in (400, 403) and wire.error_code(response) in SIGNATURE_ERRORS, \
            (response.status, response.body[:300])
    else:
        members = REQUESTS[action](kit)
        response = (tampered_call(way, kit.endpoint, key_id, action, members) if way == FORWARDED
                    else signed_call(way, kit.endpoint, key_id, action, members))
        outcome = "allowed" if response.status == 200 else "refused" if access_denied(response) else \
            f"{response.status} {response.body[:300]!r}"
        assert outcome == expected
