"""How the Spark side reaches a queue: one picklable `Connection`, boto3 clients made from it, and
the one raw HTTP call for queueserver's browse extension.

Why a frozen dataclass and not a client: Spark pickles readers, writers, partitions and
handlers and ships them to other processes (the driver-side planner, the streaming
source runner, the executors), and a boto3 client does not pickle. Every process makes
its own client from the `Connection`, and keeps one per process (`client()` caches),
because building a client costs tens of milliseconds and Python workers are reused
from task to task.

Everything goes through the SQS API, so the same code runs against AWS SQS; only
`browse_page` needs queueserver (its `QueueserverBrowseMessages` extension).
"""

from __future__ import annotations

import functools
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queueserver.consumer.client import sqs_client
from queueserver.errors import ClientError
from queueserver.extensions import BROWSE_ACTION, MAX_BROWSE


class BrowseNotSupported(ClientError, RuntimeError):
    """The endpoint does not offer queueserver's browse extension (AWS SQS, another server)."""


@dataclass(frozen=True)
class Connection:
    """Where a queue is and how to sign requests to it.

    endpoint: the SQS endpoint URL; None means boto3's own (AWS, or $AWS_ENDPOINT_URL_SQS).
    queue: a queue name or a queue URL.
    Credentials: explicit keys if given; else boto3's usual chain; and if that finds none
    while an endpoint is given, requests go unsigned (a local queueserver does not check
    signatures, so users need not invent keys) -- the same rule as `queueserver worker`.
    """

    queue: str
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Connection:
        """Build from Spark data source options (case-insensitive keys; queue or queueUrl)."""
        queue = get_option(options, "queue") or get_option(options, "queueUrl")
        if not queue:
            raise ValueError("the queueserver data source needs option('queue', NAME_OR_URL)")
        return cls(queue=queue, endpoint=get_option(options, "endpoint"), region=get_option(options, "region"),
                   access_key_id=get_option(options, "accessKeyId"),
                   secret_access_key=get_option(options, "secretAccessKey"),
                   session_token=get_option(options, "sessionToken"))

    def client(self) -> Any:
        """A boto3 SQS client for this connection, one per process."""
        return _client(self.endpoint, self.region, self.access_key_id, self.secret_access_key, self.session_token)

    def queue_url(self) -> str:
        """The queue's URL (a GetQueueUrl call for a name, cached per process)."""
        if self.queue.startswith(("http://", "https://")):
            return self.queue
        return _queue_url(self, self.queue)

    def queue_attributes(self, queue_url: str, *names: str) -> dict[str, str]:
        response = self.client().get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(names))
        return dict(response.get("Attributes", {}))


def get_option(options: Mapping[str, str], name: str) -> str | None:
    """An option by case-insensitive name: Spark lower-cases keys, a plain dict from a test may not."""
    value = options.get(name)
    if value is None:
        value = options.get(name.lower())
    if value is None:
        value = next((v for k, v in options.items() if k.lower() == name.lower()), None)
    return None if value is None or value == "" else str(value)


@functools.lru_cache(maxsize=16)
def _client(endpoint: str | None, region: str | None, access_key_id: str | None, secret_access_key: str | None,
            session_token: str | None) -> Any:
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
                                    aws_session_token=session_token)
    # Enough connections for the parallel receives, deletes and heartbeats of one process;
    # a read timeout above SQS's 20-second long poll.
    return sqs_client(session, endpoint, region, Config(retries={"mode": "standard", "max_attempts": 4},
                                                        max_pool_connections=16, connect_timeout=5, read_timeout=40))


@functools.lru_cache(maxsize=64)
def _queue_url(connection: Connection, name: str) -> str:
    return str(connection.client().get_queue_url(QueueName=name)["QueueUrl"])


def browse_page(client: Any, queue_url: str, max_messages: int = MAX_BROWSE,
                next_token: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """One page of `QueueserverBrowseMessages`: (messages, next token or None).

    boto3 has no method for an action SQS does not define, so this is a plain HTTP POST
    in AWS JSON 1.0, SigV4-signed with the client's credentials when it has any (so it
    keeps working if the server ever checks signatures), unsigned otherwise. It is the
    only request in queueserver.spark that is not made through boto3.
    """
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    endpoint = client.meta.endpoint_url
    payload: dict[str, Any] = {"QueueUrl": queue_url, "MaxNumberOfMessages": max_messages,
                               "MessageAttributeNames": ["All"]}
    if next_token:
        payload["NextToken"] = next_token
    request = AWSRequest(method="POST", url=endpoint, data=json.dumps(payload).encode(), headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{BROWSE_ACTION}"})
    credentials = client._request_signer._credentials  # None when the client is unsigned
    if credentials is not None:
        SigV4Auth(credentials.get_frozen_credentials(), "sqs", client.meta.region_name).add_auth(request)
    prepared = urllib.request.Request(endpoint, data=request.body, method="POST",
                                      headers=dict(request.headers.items()))
    try:
        with urllib.request.urlopen(prepared, timeout=60) as response:
            body = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        if "InvalidAction" in detail or "UnknownOperation" in detail or exc.code == 404:
            raise BrowseNotSupported(
                f"{endpoint} does not offer queueserver's {BROWSE_ACTION} extension, so mode 'browse' cannot "
                "read it; use mode 'receive' with queueserver.spark.consume() instead") from exc
        raise RuntimeError(f"{BROWSE_ACTION} on {queue_url} failed: HTTP {exc.code} {detail}") from exc
    token = body.get("NextToken")
    return list(body.get("Messages", [])), (str(token) if token else None)
