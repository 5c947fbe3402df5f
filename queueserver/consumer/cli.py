"""`queueserver worker package.module:handler --queue NAME`: the common case from the command line.

Wired into `queueserver/cli.py` as the `worker` subcommand through `add_arguments`
and `run`. The handler gets each message as boto3 returns it (a dict with Body,
MessageId, Attributes…). SIGTERM or SIGINT shuts down gracefully and the command
exits 0 once every message it held is settled (1 if a handler had to be cut off at
the end of the grace period, 2 if it could not start).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from queueserver.consumer.client import sqs_client
from queueserver.consumer.policies import policy_from_name
from queueserver.consumer.settings import DERIVED
from queueserver.consumer.worker import Worker

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the worker's arguments to `parser` (the `worker` subcommand's parser)."""
    parser.add_argument("handler", help="the handler to call per message, as package.module:function")
    parser.add_argument("--queue", required=True, help="queue name (or queue URL) to consume")
    parser.add_argument("--endpoint", default=None,
                        help="SQS endpoint URL; default: $AWS_ENDPOINT_URL_SQS, $AWS_ENDPOINT_URL, else AWS")
    parser.add_argument("--region", default=None, help="region; default: boto3's usual chain, else us-east-1")
    parser.add_argument("--visibility-timeout", type=int, default=30, metavar="S",
                        help="seconds of visibility per receive and per extension (default 30)")
    parser.add_argument("--concurrency", type=int, default=10, metavar="N",
                        help="handlers (FIFO: message groups) running at once (default 10)")
    parser.add_argument("--extension-threshold", type=float, default=None, metavar="S",
                        help="extend a message with less than this many seconds left "
                             "(default: 5, or half the visibility timeout if that is less)")
    parser.add_argument("--heartbeat-interval", type=float, default=None, metavar="S",
                        help="seconds between visibility heartbeats; 0 turns the heartbeat off "
                             "(default: 1, or half the extension threshold if that is less)")
    parser.add_argument("--wait-time", type=int, default=20, metavar="S", help="long-poll seconds, 0-20 (default 20)")
    parser.add_argument("--max-messages", type=int, default=10, metavar="N", help="messages per receive, 1-10")
    parser.add_argument("--prefetch", type=int, default=0, metavar="N",
                        help="messages to hold beyond --concurrency, waiting for a free slot (default 0)")
    parser.add_argument("--on-failure", choices=["expire", "visible-now", "backoff"], default="expire",
                        help="failed messages: leave to expire (default), make visible now, or back off")
    parser.add_argument("--backoff-initial", type=float, default=1.0, metavar="S",
                        help="backoff: seconds after the first failure, doubling per receive (default 1)")
    parser.add_argument("--backoff-max", type=int, default=900, metavar="S", help="backoff: the cap (default 900)")
    parser.add_argument("--grace-period", type=float, default=25.0, metavar="S",
                        help="seconds running handlers get to finish after SIGTERM (default 25)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def run(args: argparse.Namespace) -> int:
    """Run the worker until SIGTERM/SIGINT; the process's exit code."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import botocore.exceptions  # boto3 is imported only when a worker runs, not by `queueserver serve`

    try:
        handler = load_handler(args.handler)
        client = make_client(args.endpoint, args.region)
        queue_url = resolve_queue_url(client, args.queue)
        worker = Worker(
            client, queue_url, handler, max_concurrency=args.concurrency,
            visibility_timeout=args.visibility_timeout, extension_threshold=args.extension_threshold,
            heartbeat_interval=DERIVED if args.heartbeat_interval is None else args.heartbeat_interval,
            wait_time_seconds=args.wait_time,
            max_messages=args.max_messages, prefetch=args.prefetch,
            failure_policy=policy_from_name(args.on_failure, args.backoff_initial, args.backoff_max),
            shutdown_grace_period=args.grace_period)
    except (ValueError, TypeError, ImportError, AttributeError, botocore.exceptions.BotoCoreError,
            botocore.exceptions.ClientError) as exc:
        log.error("cannot start the worker: %s", exc)
        return 2
    worker.run(handle_signals=True)
    return 0 if worker.counters.abandoned == 0 else 1


def load_handler(spec: str) -> Callable[[dict[str, Any]], Any]:
    """Import `package.module:attribute[.attribute…]`, looking in the current directory first."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"handler must look like package.module:function, not {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:  # as `python -m` would, so local modules import
        sys.path.insert(0, os.getcwd())
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{spec} is not callable")
    return target  # type: ignore[no-any-return]


def make_client(endpoint: str | None, region: str | None) -> Any:
    """A boto3 SQS client: the endpoint from the flag or the environment, the region from boto3's chain."""
    import boto3
    from botocore.config import Config

    endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL_SQS") or os.environ.get("AWS_ENDPOINT_URL") or None
    return sqs_client(boto3.session.Session(), endpoint, region, Config(retries={"mode": "standard"}))


def resolve_queue_url(client: Any, queue: str) -> str:
    if queue.startswith(("http://", "https://")):
        return queue
    return str(client.get_queue_url(QueueName=queue)["QueueUrl"])


def main(argv: list[str] | None = None) -> int:
    """`python -m queueserver.consumer.cli …`, for when the `worker` subcommand is not at hand."""
    parser = argparse.ArgumentParser(prog="queueserver worker", description="Consume an SQS queue with a handler.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
