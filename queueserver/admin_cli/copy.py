"""`queueserver copy --from URL --to URL`: move a queue's messages to another SQS, such as AWS's.

Receive, send, delete, ten at a time: a message is deleted from the source only once the
destination has acknowledged it, so a crash, a Ctrl-C or a refused send leaves it in the source,
where it shows again after its visibility timeout. That is at least once: a message whose send
was acknowledged but whose delete was lost is sent again by the next run (a FIFO destination
drops such a repeat within its 5-minute deduplication window, as the copy's deduplication id is
the source's). What a message carries goes along: its body, its message attributes, its
AWSTraceHeader, its MessageGroupId, and (to a FIFO queue) its deduplication id. What the
destination sets itself does not: MessageId, SentTimestamp, receive counts.

Each URL names its own endpoint (`http://127.0.0.1:9324/000000000000/jobs`, or
`https://sqs.eu-west-1.amazonaws.com/123456789012/jobs`, whose region is taken from the host).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any
from urllib.parse import urlsplit

from queueserver.admin_cli import client
from queueserver.admin_cli.client import Admin, AdminError
from queueserver.admin_cli.output import Output

_AWS_HOST = re.compile(r"^sqs[.-]([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
_CARRIED_SYSTEM_ATTRIBUTES = ("AWSTraceHeader",)  # the only one SendMessage takes
PROGRESS_EVERY = 1000


def add_command(commands: Any) -> None:
    help = "copy a queue's messages to another queue, on this server or another SQS (AWS's): receive, send, delete"
    c = commands.add_parser("copy", help=help, description=help)
    c.add_argument("--from", dest="source", required=True, metavar="URL", help="the source queue's URL")
    c.add_argument("--to", dest="destination", required=True, metavar="URL", help="the destination queue's URL")
    c.add_argument("--region", help="the region to sign for where the URL does not say (default: the AWS "
                                    "configuration, else us-east-1)")
    c.add_argument("--max", type=int, default=None, help="copy at most this many messages")
    c.add_argument("--visibility-timeout", type=int, default=60,
                   help="seconds a received message stays hidden in the source while it is copied (default 60)")
    c.add_argument("--wait", type=int, default=2, help="the source is done when a receive waiting this many "
                                                       "seconds finds nothing (default 2)")
    c.add_argument("--group-id", help="MessageGroupId for messages that have none, when the destination is FIFO")
    c.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")


def _client(url: str, region: str | None) -> Admin:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.count("/") != 2:
        raise AdminError(f"{url}: expected a queue URL, such as http://127.0.0.1:9324/000000000000/NAME",
                         client.USAGE)
    aws = _AWS_HOST.match(parts.hostname or "")
    return Admin(f"{parts.scheme}://{parts.netloc}", aws.group(1) if aws else region)


def _entry(index: int, message: dict[str, Any], fifo: bool, group_id: str | None) -> dict[str, Any]:
    attributes = message.get("Attributes", {})
    entry: dict[str, Any] = {"Id": str(index), "MessageBody": message["Body"]}
    if message.get("MessageAttributes"):
        entry["MessageAttributes"] = {name: {k: v for k, v in value.items() if v not in ([], None)}
                                      for name, value in message["MessageAttributes"].items()}
    system = {name: {"DataType": "String", "StringValue": attributes[name]}
              for name in _CARRIED_SYSTEM_ATTRIBUTES if name in attributes}
    if system:
        entry["MessageSystemAttributes"] = system
    group = attributes.get("MessageGroupId") or (group_id if fifo else None)
    if group:
        entry["MessageGroupId"] = group
    if fifo:
        if not group:
            raise AdminError(f"message {message['MessageId']} has no MessageGroupId and the destination is a FIFO "
                             "queue: give --group-id", client.USAGE)
        entry["MessageDeduplicationId"] = attributes.get("MessageDeduplicationId") or message["MessageId"]
    return entry


def copy(_: object, out: Output, args: argparse.Namespace) -> int:
    """(The admin commands' signature: the endpoint client it would get is None here.)"""
    source, destination = _client(args.source, args.region), _client(args.destination, args.region)
    source.call("get_queue_attributes", QueueUrl=args.source, AttributeNames=["QueueArn"])  # both exist
    fifo = destination.call("get_queue_attributes", QueueUrl=args.destination, AttributeNames=["FifoQueue"]
                            ).get("Attributes", {}).get("FifoQueue") == "true"
    copied = refused = undeleted = 0
    try:
        while args.max is None or copied < args.max:
            wanted = 10 if args.max is None else max(1, min(10, args.max - copied))
            messages = source.call("receive_message", QueueUrl=args.source, MaxNumberOfMessages=wanted,
                                   WaitTimeSeconds=args.wait, VisibilityTimeout=args.visibility_timeout,
                                   MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
                                   ).get("Messages", [])
            if not messages:
                break
            try:
                entries = [_entry(i, m, fifo, args.group_id) for i, m in enumerate(messages)]
            except AdminError:  # received, not sent: visible again at once for the next run
                source.call("change_message_visibility_batch", QueueUrl=args.source, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(messages)])
                raise
            sent = destination.call("send_message_batch", QueueUrl=args.destination, Entries=entries)
            done = [messages[int(ok["Id"])] for ok in sent.get("Successful", [])]
            for failed in sent.get("Failed", []):  # left in the source: it shows again after the timeout
                refused += 1
                _say(out, f"not copied: {messages[int(failed['Id'])]['MessageId']}: {failed.get('Code')} "
                          f"{failed.get('Message', '')}")
            if done:
                deleted = source.call("delete_message_batch", QueueUrl=args.source, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
                undeleted += len(deleted.get("Failed", []))
            before, copied = copied, copied + len(done)
            if copied // PROGRESS_EVERY != before // PROGRESS_EVERY:
                _say(out, f"copied {copied}")
    except KeyboardInterrupt:  # what was received but not yet sent shows again in the source
        _finish(out, args, copied, refused, undeleted)
        return client.INTERRUPTED
    _finish(out, args, copied, refused, undeleted)
    return client.OK if not refused else client.SQS_ERROR


def _say(out: Output, line: str) -> None:
    """Progress on stderr, so that stdout holds only the result."""
    if not out.as_json:
        print(line, file=sys.stderr, flush=True)


def _finish(out: Output, args: argparse.Namespace, copied: int, refused: int, undeleted: int) -> None:
    text = f"copied {copied} messages from {args.source} to {args.destination}"
    if refused:
        text += f"; {refused} refused by the destination stay in the source"
    if undeleted:
        text += f"; {undeleted} copied but not deleted from the source will be copied again by another run"
    out.result({"copied": copied, "refused": refused, "not_deleted": undeleted, "from": args.source,
                "to": args.destination}, text)
