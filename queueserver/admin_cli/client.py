"""The SQS client the admin commands use: endpoint, region and credentials resolved, errors classified."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

from queueserver.errors import ClientError
from queueserver.extensions import LIST_SUBSCRIPTIONS_ACTION
from queueserver.limits import DEFAULT_REGION

DEFAULT_ENDPOINT = "http://127.0.0.1:9324"

# Exit codes (docs: Operations, Admin CLI).
OK = 0
SQS_ERROR = 1  # the server answered with an error
USAGE = 2  # argparse's own code for bad arguments
UNREACHABLE = 3  # no answer from the endpoint
NO_SUCH_QUEUE = 4
TASK_FAILED = 5  # a redrive ended FAILED
UNSUPPORTED = 6  # a queueserver extension asked of an endpoint without it (AWS SQS)
INTERRUPTED = 130  # Ctrl-C; a redrive's task was cancelled

_MISSING_QUEUE_CODES = {"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"}
# What an SQS endpoint answers to an action it does not know (AWS: 400 UnknownOperationException).
_UNKNOWN_ACTION_CODES = {"UnknownOperationException", "UnknownOperation", "InvalidAction"}
# `<queue>~<name>` names a subscription: no queue name can contain "~".
SUBSCRIPTION_SEPARATOR = "~"
# The calls `Admin.call` sends to the SNS client (the topics commands).
SNS_OPERATIONS = frozenset({"list_topics", "list_subscriptions_by_topic", "publish", "get_subscription_attributes"})


class AdminError(ClientError):
    """A failed command: what to print and the exit code (a ClientError: the CLI is a client of the SQS API)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def endpoint_from(option: str | None) -> str:
    return option or os.environ.get("AWS_ENDPOINT_URL_SQS") or DEFAULT_ENDPOINT


class Admin:
    """A boto3 SQS client, plus the queueserver extension calls boto3 does not know."""

    def __init__(self, endpoint: str, region: str | None) -> None:
        import boto3
        from botocore.config import Config
        from botocore.credentials import Credentials

        session = boto3.session.Session()
        self.region = region or session.region_name or DEFAULT_REGION
        # A local queueserver accepts any key; AWS needs real ones, found the usual way.
        self._credentials = session.get_credentials() or Credentials("queueserver", "queueserver")
        frozen = self._credentials.get_frozen_credentials()
        self.endpoint = endpoint
        self.sqs = session.client("sqs", region_name=self.region, endpoint_url=endpoint,
                                  aws_access_key_id=frozen.access_key, aws_secret_access_key=frozen.secret_key,
                                  aws_session_token=frozen.token,
                                  config=Config(retries={"total_max_attempts": 2}, read_timeout=60))
        self.sns = session.client("sns", region_name=self.region, endpoint_url=endpoint,  # topics (SNS) commands
                                  aws_access_key_id=frozen.access_key, aws_secret_access_key=frozen.secret_key,
                                  aws_session_token=frozen.token, config=Config(retries={"total_max_attempts": 2}))

    def url(self, name: str) -> str:
        """The URL of a queue by name, of a subscription by `QUEUE~NAME`; a URL is taken as it is."""
        if name.startswith(("http://", "https://")):
            return name
        queue, separator, subscription = name.partition(SUBSCRIPTION_SEPARATOR)
        url = self.call("get_queue_url", QueueName=queue)["QueueUrl"]
        if not separator:
            return url
        for found in self.subscriptions(url):
            if found["SubscriptionName"] == subscription:
                return str(found["SubscriptionUrl"])
        raise AdminError(f"{queue} has no subscription {subscription}", NO_SUCH_QUEUE)

    def subscriptions(self, queue_url: str) -> list[dict[str, str]]:
        """[{SubscriptionName, SubscriptionUrl}] of a queue (a queueserver extension)."""
        return self.extension(LIST_SUBSCRIPTIONS_ACTION, {"QueueUrl": queue_url}).get("Subscriptions", [])

    def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """A boto3 call whose failures become AdminErrors with a meaningful exit code."""
        from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

        try:
            service = self.sns if operation in SNS_OPERATIONS else self.sqs
            return getattr(service, operation)(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise _sqs_error(error.get("Code", "?"), error.get("Message", "")) from None
        except EndpointConnectionError:
            raise AdminError(f"cannot reach {self.endpoint}", UNREACHABLE) from None
        except BotoCoreError as exc:
            raise AdminError(str(exc), UNREACHABLE) from None

    def extension(self, action: str, params: dict[str, Any]) -> dict[str, Any]:
        """A queueserver extension action over AWS JSON, signed like any SQS request."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method="POST", url=self.endpoint.rstrip("/") + "/", data=json.dumps(params).encode(),
                             headers={"Content-Type": "application/x-amz-json-1.0",
                                      "X-Amz-Target": f"AmazonSQS.{action}"})
        SigV4Auth(self._credentials, "sqs", self.region).add_auth(request)
        prepared = request.prepare()
        http = urllib.request.Request(prepared.url, data=prepared.body, headers=dict(prepared.headers), method="POST")
        try:
            with urllib.request.urlopen(http, timeout=60) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                error = json.loads(exc.read())
            except ValueError:
                raise _unsupported(action, self.endpoint) from None
            code = str(error.get("__type", "?")).rpartition("#")[2]
            if code in _UNKNOWN_ACTION_CODES:
                raise _unsupported(action, self.endpoint) from None
            raise _sqs_error(code, str(error.get("message", ""))) from None
        except (urllib.error.URLError, OSError):
            raise AdminError(f"cannot reach {self.endpoint}", UNREACHABLE) from None


def _unsupported(action: str, endpoint: str) -> AdminError:
    return AdminError(f"{action} is a queueserver extension that {endpoint} does not offer "
                      "(AWS SQS has no peek and no subscriptions)", UNSUPPORTED)


def _sqs_error(code: str, message: str) -> AdminError:
    exit_code = NO_SUCH_QUEUE if code in _MISSING_QUEUE_CODES else SQS_ERROR
    return AdminError(f"{code}: {message}" if message else code, exit_code)
