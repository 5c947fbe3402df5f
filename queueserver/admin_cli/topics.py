"""`queueserver topics` and `queueserver publish`: the SNS topics of a server, and publishing to one.

`topics` lists each topic with its subscriptions (queue, raw delivery, filter policy); `publish`
sends one message to a topic, given by name or ARN, and prints its MessageId.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from queueserver.admin_cli import client
from queueserver.admin_cli.client import Admin, AdminError
from queueserver.admin_cli.output import Output


def _topic_arns(admin: Admin) -> list[str]:
    arns: list[str] = []
    token = None
    while True:
        page = admin.call("list_topics", **({"NextToken": token} if token else {}))
        arns += [t["TopicArn"] for t in page.get("Topics", [])]
        token = page.get("NextToken")
        if not token:
            return arns


def _subscriptions(admin: Admin, topic_arn: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    token = None
    while True:
        page = admin.call("list_subscriptions_by_topic", TopicArn=topic_arn, **({"NextToken": token} if token else {}))
        for s in page.get("Subscriptions", []):
            attributes = admin.call("get_subscription_attributes", SubscriptionArn=s["SubscriptionArn"])["Attributes"]
            rows.append({"subscription": s["SubscriptionArn"], "endpoint": s["Endpoint"],
                         "raw": attributes.get("RawMessageDelivery", "false"),
                         "filter_policy": attributes.get("FilterPolicy", ""),
                         "filter_scope": attributes.get("FilterPolicyScope", "") if attributes.get("FilterPolicy")
                         else ""})
        token = page.get("NextToken")
        if not token:
            return rows


def topics(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    listed: list[dict[str, Any]] = [{"topic": arn, "subscriptions": _subscriptions(admin, arn)}
                                    for arn in _topic_arns(admin)]
    rows: list[list[Any]] = []
    for t in listed:
        rows.append([t["topic"].rpartition(":")[2], len(t["subscriptions"]), "", ""])
        rows += [[f"  → {s['endpoint'].rpartition(':')[2]}", "", s["raw"],
                  f"{s['filter_policy']} ({s['filter_scope']})" if s["filter_policy"] else ""]
                 for s in t["subscriptions"]]
    out.table(listed, f"topics at {admin.endpoint} (→: a subscribed queue)",
              ["name", "subscriptions", "raw delivery", "filter policy"], rows)
    return client.OK


def publish(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    message = args.message
    if message is None or message == "-":
        message = sys.stdin.read()
    topic = args.topic
    if not topic.startswith("arn:"):
        topic = next((arn for arn in _topic_arns(admin) if arn.rpartition(":")[2] == topic), None)
        if topic is None:
            raise AdminError(f"no topic named {args.topic}", client.NO_SUCH_QUEUE)
    params: dict[str, Any] = {"TopicArn": topic, "Message": message}
    for option, member in (("subject", "Subject"), ("group_id", "MessageGroupId"),
                           ("deduplication_id", "MessageDeduplicationId")):
        if getattr(args, option) is not None:
            params[member] = getattr(args, option)
    attributes = {}
    for pair in args.attribute or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise AdminError(f"--attribute {pair!r}: expected NAME=VALUE", client.USAGE)
        attributes[key] = {"DataType": "String", "StringValue": value}
    if attributes:
        params["MessageAttributes"] = attributes
    answer = admin.call("publish", **params)
    result = {"MessageId": answer["MessageId"], **({"SequenceNumber": answer["SequenceNumber"]}
                                                   if answer.get("SequenceNumber") else {})}
    out.result(result, answer["MessageId"])
    return client.OK


def add_commands(command: Any) -> None:
    """Declare the two commands; `command(name, help)` makes a sub-parser with the common options."""
    command("topics", "a table of the SNS topics and their subscriptions: queue, raw delivery, filter policy")
    p = command("publish", "publish one message to an SNS topic; the message from the argument or stdin (- or "
                           "nothing); prints its MessageId")
    p.add_argument("topic", help="the topic's name or ARN")
    p.add_argument("message", nargs="?")
    p.add_argument("--subject", help="Subject")
    p.add_argument("--attribute", action="append", metavar="NAME=VALUE", help="a String message attribute; repeat")
    p.add_argument("--group-id", help="MessageGroupId (FIFO topics)")
    p.add_argument("--deduplication-id", help="MessageDeduplicationId (FIFO topics)")
