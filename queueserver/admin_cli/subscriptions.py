"""`queueserver subscriptions|subscription`: a queue's subscriptions, listed, created, deleted.

Subscriptions are a queueserver extension: against AWS SQS these commands exit UNSUPPORTED with a
message saying so. Everything else (receive, peek, purge, attributes) takes a subscription as
`QUEUE~NAME` or its URL through Admin.url, so it needs no command of its own here.
"""

from __future__ import annotations

import argparse
from typing import Any

from queueserver.admin_cli import client
from queueserver.admin_cli.client import Admin, AdminError
from queueserver.admin_cli.output import Output
from queueserver.admin_cli.rows import subscription_rows
from queueserver.extensions import CREATE_SUBSCRIPTION_ACTION, DELETE_SUBSCRIPTION_ACTION



def subscriptions(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    rows = subscription_rows(admin, admin.url(args.name))
    out.table(rows, f"subscriptions of {args.name}", ["name", "url", "visible", "in flight", "delayed",
                                                      "oldest age (s)", "dead-letter queue"],
              [[r["name"], r["url"], r["visible"], r["in_flight"], r["delayed"], r["oldest_age_seconds"],
                r["dead_letter_queue"]] for r in rows])
    return client.OK


def subscription(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    if args.action == "create":
        if args.subscription is None:
            raise AdminError("subscription create QUEUE NAME: the subscription's name is missing", client.USAGE)
        url = admin.extension(CREATE_SUBSCRIPTION_ACTION, {"QueueUrl": admin.url(args.target), "SubscriptionName":
                                              args.subscription, "StartFrom": args.start_from})["SubscriptionUrl"]
        out.result({"SubscriptionUrl": url}, url)
        return client.OK
    address = args.target if args.subscription is None else \
        f"{args.target}{client.SUBSCRIPTION_SEPARATOR}{args.subscription}"
    if client.SUBSCRIPTION_SEPARATOR not in address:
        raise AdminError(f"{address} names a queue: give QUEUE NAME, QUEUE~NAME or the subscription's URL",
                         client.USAGE)
    url = admin.url(address)
    admin.extension(DELETE_SUBSCRIPTION_ACTION, {"SubscriptionUrl": url})
    out.result({"deleted": url}, f"deleted {url}")
    return client.OK


def add_commands(command: Any) -> None:
    """Declare the two commands; `command(name, help)` makes a sub-parser with the common options."""
    listed = command("subscriptions", "a table of a queue's subscriptions: name, URL, visible, in flight, "
                                      "delayed, oldest age, dead-letter queue (a queueserver extension)")
    listed.add_argument("name", help="the queue")
    managed = command("subscription", "create or delete a subscription of a queue (a queueserver extension)")
    managed.add_argument("action", choices=["create", "delete"])
    managed.add_argument("target", metavar="QUEUE", help="the queue; for delete also QUEUE~NAME or the "
                                                         "subscription's URL")
    managed.add_argument("subscription", metavar="NAME", nargs="?", help="the subscription's name")
    managed.add_argument("--start-from", choices=["new", "all"], default="new",
                         help="create: receive what is sent from now on (new, the default) or also every "
                              "message the queue holds now (all)")
