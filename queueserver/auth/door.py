"""The authorization door, declared: what every action, console form and server endpoint needs, and of whom.

One table, `DOOR`, holds a `Rule` per way in: the SQS actions and the queueserver extensions (by action
name), the console's forms and pages (`console …`), and the server's own endpoints (`GET /metrics` …).
A rule lists its `Need`s: which IAM actions on which resource of the request (the queue a QueueUrl
names, a move task's source and destination, a RedrivePolicy's dead-letter target …), including the
dependent actions AWS's Service Authorization Reference lists. The dispatcher (protocol/door.py) resolves
each resource and evaluates the whole rule before any handler runs; a handler receives the queues already
authorized and never asks again. A console form is the SQS action it runs (`runs`), so it passes the very
same rule with the same `Principal`; a topic page's part or form runs an SNS action (`api="SNS"`) through the
SNS door, whose table (protocol/sns/authorization.py) holds that action's rule. tests/unit/test_door.py walks every table of actions and routes and
fails on one without a rule; docs/security.md's table is `reference_table()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from queueserver import extensions as ext

# The resources a rule names (a need's `resource`), as the security page says them.
QUEUE = "the queue"  # the queue its QueueUrl (or the URL's path) names; a subscription's URL names it
NAMED_QUEUE = "the named queue"  # GetQueueUrl: QueueName, in QueueOwnerAWSAccountId's account
NEW_QUEUE = "the new queue"  # CreateQueue: QueueName in the caller's account
ACCOUNT = "*"  # an action on no queue (ListQueues)
SOURCE = "the source"  # SourceArn, or the source a TaskHandle names
DESTINATION = "the destination"  # DestinationArn, or without it every queue the messages return to
DEAD_LETTER_TARGET = "the dead-letter target"  # a RedrivePolicy's deadLetterTargetArn (set, or the queue's own)
NEW_SUBSCRIPTION = "the new subscription"  # `<queue>~<SubscriptionName>`
SERVER = "the server"  # server-wide: only a key's identity policy can allow it, no queue policy
TOPIC = "the topic"  # a console topic page's: the topic its path names

# How another account may be let in (a Rule's `another_account`).
OWN = "acts in its own account"
GRANTED = "where the queue's Policy allows it"
NAMED = "only where the queue's Policy names the action"
TOPIC_GRANTED = "where the topic's Policy allows it"
NEVER = "never"
IDENTITY_ONLY = "only by the key's own identity policy"
ADMIN_ONLY = "only a key marked admin = true"
ANY_KEY = "any signed key"
NO_KEY = "no credentials asked"


@dataclass(frozen=True, slots=True)
class Need:
    """IAM actions the policies must all allow on one resource of the request.

    `when`: a request member and the value that brings the need in (None: always).
    """

    resource: str
    actions: tuple[str, ...]
    when: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    needs: tuple[Need, ...]
    another_account: str
    runs: str | None = None  # a console form: the action it runs, whose rule it is
    api: str = "SQS"  # the API whose action `runs` names: "SNS" for the topic pages' (protocol/sns/authorization.py)
    note: str = ""  # what the table says beside the needs


def _on_queue(action: str, *more: str, another: str = GRANTED) -> Rule:
    return Rule((Need(QUEUE, (f"sqs:{action}", *(f"sqs:{m}" for m in more))),), another)


_MOVE_SOURCE = ("sqs:StartMessageMoveTask", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
_REDRIVE_TARGET = Need(DEAD_LETTER_TARGET, ("sqs:SendMessage",))

SQS_RULES: dict[str, Rule] = {
    "CreateQueue": Rule((Need(NEW_QUEUE, ("sqs:CreateQueue",)), _REDRIVE_TARGET), OWN,
                        note="with a RedrivePolicy also `sqs:SendMessage` on its dead-letter target"),
    "ListQueues": Rule((Need(ACCOUNT, ("sqs:ListQueues",)),), OWN),
    "GetQueueUrl": Rule((Need(NAMED_QUEUE, ("sqs:GetQueueUrl",)),), GRANTED),
    "GetQueueAttributes": _on_queue("GetQueueAttributes"),
    "PurgeQueue": _on_queue("PurgeQueue"),
    "SendMessage": _on_queue("SendMessage"),
    "SendMessageBatch": _on_queue("SendMessage"),
    "ReceiveMessage": Rule((Need(QUEUE, ("sqs:ReceiveMessage",)), _REDRIVE_TARGET), GRANTED,
                           note="on a queue with a RedrivePolicy also `sqs:SendMessage` on its dead-letter queue, "
                                "where a receive past maxReceiveCount moves messages"),
    "DeleteMessage": _on_queue("DeleteMessage"),
    "DeleteMessageBatch": _on_queue("DeleteMessage"),
    "ChangeMessageVisibility": _on_queue("ChangeMessageVisibility"),
    "ChangeMessageVisibilityBatch": _on_queue("ChangeMessageVisibility"),
    "ListDeadLetterSourceQueues": _on_queue("ListDeadLetterSourceQueues"),
    "SetQueueAttributes": Rule((Need(QUEUE, ("sqs:SetQueueAttributes",)), _REDRIVE_TARGET), NEVER,
                               note="with a RedrivePolicy also `sqs:SendMessage` on its dead-letter target"),
    "DeleteQueue": _on_queue("DeleteQueue", another=NEVER),
    "TagQueue": _on_queue("TagQueue", another=NEVER),
    "UntagQueue": _on_queue("UntagQueue", another=NEVER),
    "ListQueueTags": _on_queue("ListQueueTags", another=NEVER),
    "AddPermission": _on_queue("AddPermission", another=NEVER),
    "RemovePermission": _on_queue("RemovePermission", another=NEVER),
    "StartMessageMoveTask": Rule((Need(SOURCE, _MOVE_SOURCE), Need(DESTINATION, ("sqs:SendMessage",))), NEVER,
                                 note="the destination is DestinationArn, or without it every queue the "
                                      "messages return to"),
    "ListMessageMoveTasks": Rule((Need(SOURCE, ("sqs:ListMessageMoveTasks",)),), NEVER),
    "CancelMessageMoveTask": Rule((Need(SOURCE, ("sqs:CancelMessageMoveTask",)),), NEVER),
    ext.BROWSE_ACTION: _on_queue(ext.BROWSE_ACTION, "ReceiveMessage"),
    ext.CREATE_SUBSCRIPTION_ACTION: Rule((
        Need(QUEUE, (f"sqs:{ext.CREATE_SUBSCRIPTION_ACTION}",)),
        Need(QUEUE, ("sqs:ReceiveMessage",), when=("StartFrom", "all")),
        Need(NEW_SUBSCRIPTION, (f"sqs:{ext.CREATE_SUBSCRIPTION_ACTION}",))), NAMED),
    ext.DELETE_SUBSCRIPTION_ACTION: Rule((Need(QUEUE, (f"sqs:{ext.DELETE_SUBSCRIPTION_ACTION}",)),), NAMED,
                                         note="the queue is the subscription SubscriptionUrl names"),
    ext.LIST_SUBSCRIPTIONS_ACTION: _on_queue(ext.LIST_SUBSCRIPTIONS_ACTION),
}

_METRICS = Rule((Need(SERVER, ("queueserver:GetMetrics",)),), IDENTITY_ONLY)

# The console: a form is the SQS action it runs (on a subscription's page, the second of FORM_ACTIONS' pair);
# a topic page's part or form the SNS action it runs, through the SNS door.
CONSOLE_RULES: dict[str, Rule] = {
    "console create": Rule((), OWN, runs="CreateQueue"),
    "console send": Rule((), GRANTED, runs="SendMessage"),
    "console purge": Rule((), GRANTED, runs="PurgeQueue"),
    "console delete": Rule((), NEVER, runs="DeleteQueue"),
    "console delete subscription": Rule((), NAMED, runs=ext.DELETE_SUBSCRIPTION_ACTION),
    "console redrive": Rule((), NEVER, runs="StartMessageMoveTask"),
    "console cancel": Rule((), NEVER, runs="CancelMessageMoveTask"),
    "console subscribe": Rule((), NAMED, runs=ext.CREATE_SUBSCRIPTION_ACTION),
    "console overview": Rule((Need(QUEUE, ("sqs:GetQueueAttributes",)),), GRANTED,
                             note="each queue listed, and each one a Previous/Next link names"),
    "console queue page": Rule((Need(QUEUE, ("sqs:GetQueueAttributes",)),), GRANTED),
    "console messages": Rule((), GRANTED, runs=ext.BROWSE_ACTION),
    "console topics": Rule((Need(TOPIC, ("sns:GetTopicAttributes",)),), TOPIC_GRANTED,
                           note="each topic listed"),
    "console topic page": Rule((), TOPIC_GRANTED, runs="GetTopicAttributes", api="SNS"),
    "console topic subscriptions": Rule((), TOPIC_GRANTED, runs="ListSubscriptionsByTopic", api="SNS"),
    "console subscription attributes": Rule((), TOPIC_GRANTED, runs="GetSubscriptionAttributes", api="SNS"),
    "console publish": Rule((), TOPIC_GRANTED, runs="Publish", api="SNS"),
    "console server page details": Rule((), ADMIN_ONLY, note="the database path and the server's totals"),
    "console login": Rule((), NO_KEY, note="a key id and its secret"),
    "console logout": Rule((), NO_KEY),
}

SERVER_RULES: dict[str, Rule] = {
    "GET /metrics": _METRICS,
    "GET /ready details": Rule(_METRICS.needs, IDENTITY_ONLY,
                               note="without it: ready or not ready, nothing more"),
    "GET /health": Rule((), NO_KEY),
    "GET /ready": Rule((), NO_KEY, note="ready or not ready"),
    "GET /favicon.ico": Rule((), NO_KEY),
    "GET /_queueserver/clock": Rule((), ANY_KEY),
    "POST /_queueserver/clock": Rule((), ADMIN_ONLY),
    "POST /_queueserver/promote": Rule((), ADMIN_ONLY, note="a standby's promotion (and a repeated one, answered "
                                                            "by the promoted server)"),
}

DOOR: dict[str, Rule] = {**SQS_RULES, **CONSOLE_RULES, **SERVER_RULES}

# Each route of app.ROUTES, and each of the console's, with the rules of the door its requests pass.
ROUTE_DOORS: dict[str, tuple[str, ...]] = {
    "metrics": ("GET /metrics",),
    "health": ("GET /health",),
    "ready": ("GET /ready", "GET /ready details"),
    "favicon": ("GET /favicon.ico",),
    "home": tuple(SQS_RULES),  # an SDK's GET / is an SQS request; a browser's is sent to the console
    "clock": ("GET /_queueserver/clock", "POST /_queueserver/clock"),
    "console": tuple(CONSOLE_RULES),
    "sqs": tuple(SQS_RULES),
}
CONSOLE_ROUTE_DOORS: dict[str, tuple[str, ...]] = {
    "/": ("console overview",),
    "/server": ("console server page details",),
    "/login": ("console login",),
    "/logout": ("console logout",),
    "/create": ("console create",),
    "/queues/{region}/{name}": ("console queue page",),
    "/queues/{region}/{account}/{name}": ("console queue page", "console messages"),
    "/queues/{region}/{account}/{name}/{action}": ("console send", "console purge", "console delete",
                                                   "console delete subscription", "console redrive",
                                                   "console cancel", "console subscribe"),
    "/topics": ("console topics",),
    "/topics/{region}/{account}/{name}": ("console topic page", "console topic subscriptions",
                                          "console subscription attributes"),
    "/topics/{region}/{account}/{name}/publish": ("console publish",),
}


# A standby's own routes (standby.py: `STANDBY_ROUTES`), beside the snapshot's app, whose routes are ROUTE_DOORS'.
STANDBY_ROUTE_DOORS: dict[str, tuple[str, ...]] = {
    "GET /health": ("GET /health",),
    "GET /ready": ("GET /ready", "GET /ready details"),
    "GET /metrics": ("GET /metrics",),
    "POST /_queueserver/promote": ("POST /_queueserver/promote",),
}


def rule_of(name: str) -> Rule:
    """The rule of a way in; a console form's is the rule of the SQS action it runs (one running an SNS action
    keeps its own: the SNS door's table, protocol/sns/authorization.py, holds that action's)."""
    rule = DOOR[name]
    return DOOR[rule.runs] if rule.runs is not None and rule.api == "SQS" else rule


def _needs_text(rule: Rule) -> str:
    parts = []
    for need in rule.needs:
        actions = ", ".join(f"`{a}`" for a in need.actions)
        when = f" when `{need.when[0]}={need.when[1]}`" if need.when else ""
        if need.resource == DEAD_LETTER_TARGET:
            continue  # said by the note, which says when
        parts.append(f"{actions} on {need.resource}{when}")
    return "; ".join(parts)


def reference_table() -> str:
    """docs/security.md's table of the door, made from DOOR (a test keeps the page equal to it)."""
    rows = ["| way in | the policies must allow | another account |", "|---|---|---|"]
    for name, rule in DOOR.items():
        shown = f"`{name}`" if name in SQS_RULES else name
        if rule.runs is not None:
            needs = f"as `{rule.runs}`" if rule.api == "SQS" else f"as SNS `{rule.runs}`"
        else:
            needs = _needs_text(rule) or "nothing"
            if rule.note:
                needs = f"{needs} ({rule.note})" if needs != "nothing" else rule.note
        rows.append(f"| {shown} | {needs} | {rule.another_account} |")
    return "\n".join(rows)
