"""The admin commands: argparse declarations and one handler each."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Iterator

from queueserver.admin_cli import client
from queueserver.admin_cli import copy as copy_command
from queueserver.admin_cli import subscriptions, topics
from queueserver.admin_cli.client import SUBSCRIPTION_SEPARATOR, Admin, AdminError
from queueserver.admin_cli.output import Output, counted, error
from queueserver.admin_cli.redrive import redrive
from queueserver.admin_cli.rows import queue_pages
from queueserver.extensions import BROWSE_ACTION


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    pairs = {}
    for value in values or []:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise AdminError(f"{option} {value!r}: expected KEY=VALUE", client.USAGE)
        pairs[key] = text
    return pairs


def queues(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    """A table (or a JSON array) per ListQueues page, printed as it comes: any number of queues in
    constant memory. Without --all, at most --max queues, and a hint to list the rest."""
    if args.max < 1:
        raise AdminError("--max: expected a number of queues, 1 or more", client.USAGE)
    pages = queue_pages(admin, args.prefix, None if args.all else args.max, args.next_token)
    more: list[str | None] = [None]

    def rows() -> Iterator[list[dict[str, Any]]]:
        for page, token in pages:
            more[0] = token
            yield page

    if out.as_json:
        out.json_array(row for page in rows() for row in page)
    else:
        for number, page in enumerate(rows()):
            table = []
            for r in page:
                table.append([r["name"], r["visible"], r["in_flight"], r["delayed"], r["oldest_age_seconds"],
                              r["dead_letter_queue"]])
                table += [[f"  {SUBSCRIPTION_SEPARATOR}{s['name']}", s["visible"], s["in_flight"], s["delayed"],
                           s["oldest_age_seconds"], s["dead_letter_queue"]] for s in r["subscriptions"] or []]
            out.table(page, f"queues at {admin.endpoint} (~: a subscription){' continued' if number else ''}", [
                "name", "visible", "in flight", "delayed", "oldest age (s)", "dead-letter queue"], table)
    if more[0] is not None:
        error(f"more queues follow: --next-token {more[0]} lists them (or --all, every queue)")
    return client.OK


def queue(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    name = args.name
    if args.action == "create":
        attributes = _pairs(args.attribute, "--attribute")
        if name.endswith(".fifo"):
            attributes.setdefault("FifoQueue", "true")
        url = admin.call("create_queue", QueueName=name, Attributes=attributes,
                         tags=_pairs(args.tag, "--tag"))["QueueUrl"]
        out.result({"QueueUrl": url}, url)
    elif args.action == "delete":
        admin.call("delete_queue", QueueUrl=admin.url(name))
        out.result({"deleted": name}, f"deleted {name}")
    elif args.action == "purge":
        admin.call("purge_queue", QueueUrl=admin.url(name))
        out.result({"purged": name}, f"purged {name}")
    else:
        url = admin.url(name)
        changes = _pairs(args.set, "--set")
        if changes:
            admin.call("set_queue_attributes", QueueUrl=url, Attributes=changes)
        attributes = admin.call("get_queue_attributes", QueueUrl=url, AttributeNames=["All"])["Attributes"]
        out.table(attributes, name, ["attribute", "value"], sorted([k, v] for k, v in attributes.items()))
    return client.OK


def send(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    if args.file is not None:
        with open(args.file, encoding="utf-8") as file:
            body = _without_line_end(file.read())
    elif args.body in (None, "-"):
        body = _without_line_end(sys.stdin.read())
    else:
        body = args.body
    params: dict[str, Any] = {"QueueUrl": admin.url(args.name), "MessageBody": body}
    optional = {"MessageGroupId": args.group_id, "MessageDeduplicationId": args.deduplication_id,
                "DelaySeconds": args.delay}
    params.update({k: v for k, v in optional.items() if v is not None})
    sent = admin.call("send_message", **params)
    sent.pop("ResponseMetadata", None)
    out.result(sent, sent["MessageId"])
    return client.OK


def _without_line_end(text: str) -> str:
    """A file or a pipe ends its last line with a newline that is no part of the body: `echo hello |` sends
    "hello", as the shell's $(...) would give it. Only one goes: a body that ends in a blank line keeps it."""
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def receive(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    url = admin.url(args.name)
    params: dict[str, Any] = {"QueueUrl": url, "MaxNumberOfMessages": args.max, "WaitTimeSeconds": args.wait,
                              "MessageSystemAttributeNames": ["All"], "MessageAttributeNames": ["All"]}
    if args.visibility_timeout is not None:
        params["VisibilityTimeout"] = args.visibility_timeout
    messages = admin.call("receive_message", **params).get("Messages", [])
    if args.delete and messages:
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        failed = admin.call("delete_message_batch", QueueUrl=url, Entries=entries).get("Failed", [])
        if failed:
            raise AdminError(f"{len(failed)} received messages could not be deleted: {failed[0].get('Code')}",
                             client.SQS_ERROR)
        for message in messages:
            message["State"] = "deleted"
    _messages(out, args.name, messages)
    return client.OK


def peek(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    messages = admin.extension(BROWSE_ACTION, {"QueueUrl": admin.url(args.name),
                                               "MaxNumberOfMessages": args.max}).get("Messages", [])
    _messages(out, args.name, messages)
    return client.OK


def _messages(out: Output, name: str, messages: list[dict[str, Any]]) -> None:
    out.table(messages, f"{counted(len(messages), 'message')} from {name}",
              ["message id", "state", "receives", "body"],
              [[m["MessageId"], m.get("State", "received"), m.get("Attributes", {}).get("ApproximateReceiveCount"),
                m["Body"] if len(m["Body"]) <= 200 else m["Body"][:200] + "…"] for m in messages])


def stats(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    """Totals over every queue, added up page by page (only each queue's message count is kept: which
    queues are dead-letter queues is known at the end)."""
    totals: dict[str, Any] = {"queues": 0, "subscriptions": 0, "visible": 0, "in_flight": 0, "delayed": 0,
                              "dead_letter_queues": 0, "messages_in_dead_letter_queues": 0,
                              "oldest_age_seconds": None}
    messages: dict[str, int] = {}
    dead_letter_queues: set[str] = set()
    for page, _ in queue_pages(admin, "", None):
        for r in page:
            totals["queues"] += 1
            totals["subscriptions"] += len(r["subscriptions"] or [])
            for key in ("visible", "in_flight", "delayed"):
                totals[key] += r[key]
            messages[r["name"]] = r["visible"] + r["in_flight"] + r["delayed"]
            if r["dead_letter_queue"]:
                dead_letter_queues.add(r["dead_letter_queue"])
            if r["oldest_age_seconds"] is not None:
                totals["oldest_age_seconds"] = max(totals["oldest_age_seconds"] or 0, r["oldest_age_seconds"])
    totals["dead_letter_queues"] = len(dead_letter_queues)
    totals["messages_in_dead_letter_queues"] = sum(messages.get(name, 0) for name in dead_letter_queues)
    out.table(totals, f"totals at {admin.endpoint}", ["", "value"], [[k.replace("_", " "), v]
                                                                    for k, v in totals.items()])
    return client.OK


Handler = Callable[[Admin, Output, argparse.Namespace], int]
COMMANDS: dict[str, Handler] = {"queues": queues, "queue": queue, "send": send, "receive": receive,
                                "peek": peek, "redrive": redrive, "stats": stats,
                                "subscriptions": subscriptions.subscriptions,
                                "subscription": subscriptions.subscription,
                                "copy": copy_command.copy, "topics": topics.topics, "publish": topics.publish}


def add_commands(commands: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--endpoint", help=f"the SQS endpoint (default: $AWS_ENDPOINT_URL_SQS, else "
                                           f"{client.DEFAULT_ENDPOINT})")
    common.add_argument("--region", help="the region to sign for (default: the AWS configuration, else us-east-1)")
    common.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, parents=[common], description=help)

    listing = command("queues", "a table of the queues: messages visible, in flight, delayed, oldest age, "
                                "dead-letter queue")
    listing.add_argument("--prefix", default="", help="only queues whose name starts with it")
    listing.add_argument("--max", type=int, default=100, help="at most this many queues (default 100)")
    listing.add_argument("--all", action="store_true", help="every queue, a page of 1,000 at a time")
    listing.add_argument("--next-token", help="start where a listing stopped (it prints the token)")
    q = command("queue", "create, delete, purge a queue or show (and --set) its attributes")
    q.add_argument("action", choices=["create", "delete", "purge", "attributes"])
    q.add_argument("name")
    q.add_argument("--attribute", action="append", metavar="NAME=VALUE", help="create: an attribute; repeat")
    q.add_argument("--tag", action="append", metavar="KEY=VALUE", help="create: a tag; repeat")
    q.add_argument("--set", action="append", metavar="NAME=VALUE", help="attributes: change one first; repeat")
    s = command("send", "send one message; the body from the argument, --file, or stdin (- or nothing), "
                        "less the final newline of a file or stdin")
    s.add_argument("name")
    s.add_argument("body", nargs="?")
    s.add_argument("--file", help="read the body from this file")
    s.add_argument("--group-id", help="MessageGroupId (FIFO queues)")
    s.add_argument("--deduplication-id", help="MessageDeduplicationId (FIFO queues)")
    s.add_argument("--delay", type=int, help="DelaySeconds")
    r = command("receive", "receive messages (they become in flight unless --delete deletes them)")
    r.add_argument("name")
    r.add_argument("--max", type=int, default=1, help="at most this many, 1 to 10 (default 1)")
    r.add_argument("--wait", type=int, default=0, help="long-poll up to this many seconds (default 0)")
    r.add_argument("--visibility-timeout", type=int, help="seconds the messages stay in flight")
    r.add_argument("--delete", action="store_true", help="delete what was received")
    p = command("peek", "show messages without receiving them: nothing moves (a queueserver extension)")
    p.add_argument("name")
    p.add_argument("--max", type=int, default=10, help="at most this many, 1 to 1000 (default 10)")
    d = command("redrive", "move a dead-letter queue's messages back (a move task) with a progress bar; "
                           "Ctrl-C cancels the task")
    d.add_argument("name", help="the dead-letter queue")
    d.add_argument("--to", help="the destination queue (default: each message's source queue)")
    d.add_argument("--rate", type=int, help="MaxNumberOfMessagesPerSecond")
    d.add_argument("--interval", type=float, default=0.5, help="seconds between progress polls (default 0.5)")
    command("stats", "totals over all queues")
    subscriptions.add_commands(command)
    topics.add_commands(command)
    copy_command.add_command(commands)


def run(args: argparse.Namespace) -> int:
    out = Output(args.json)
    try:
        # copy has two endpoints, each from its queue's URL
        admin = None if args.command == "copy" else Admin(client.endpoint_from(args.endpoint), args.region)
        return COMMANDS[args.command](admin, out, args)  # type: ignore[arg-type]
    except AdminError as exc:
        error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:  # a long poll or a listing cut short: nothing to undo
        return client.INTERRUPTED
    except OSError as exc:  # --file
        error(f"{exc.filename}: {exc.strerror}")
        return client.USAGE
