"""Helpers of the authentication tests: a credentials file, clients signing with its keys, raw signed HTTP.

Every signature here is botocore's own (SigV4Auth for the header form, SigV4QueryAuth for
presigned URLs), so the server is checked against the signer every SDK uses. `signed_call` sends any
action (SQS's or an extension) in JSON-shaped members by one of the signed ways in (`WAYS`).
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import boto3
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.config import Config
from botocore.credentials import Credentials
from support import wire
from support.clients import make_query_client
from support.server import ClockControl

OWNER_ACCOUNT = "111111111111"
OTHER_ACCOUNT = "222222222222"
THIRD_ACCOUNT = "333333333333"
OPERATIONS_ACCOUNT = "999999999999"
JOBS_QUEUE = "jobs"
# A worker's key: receive, delete and change visibility on the one queue "jobs" of its account.
WORKER_POLICY = json.dumps({"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow",
    "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueue*"],
    "Resource": f"arn:aws:sqs:*:{OWNER_ACCOUNT}:{JOBS_QUEUE}",
}]})
# A key whose identity policy allows everything but denies every SQS and queueserver action.
DENIED_POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "*", "Resource": "*"},
    {"Effect": "Deny", "Action": ["sqs:*", "queueserver:*"], "Resource": "*"}]})
# A redrive key: move tasks on dead-letter queues named `*-dlq`, and sending only to queues named `*-back`.
REDRIVER_POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks", "sqs:ReceiveMessage",
                                   "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
     "Resource": f"arn:aws:sqs:*:{OWNER_ACCOUNT}:*-dlq"},
    {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": f"arn:aws:sqs:*:{OWNER_ACCOUNT}:*-back"}]})
METRICS_POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "queueserver:GetMetrics", "Resource": "*"}]})
ACCOUNT_QUEUES = f"arn:aws:sqs:*:{OWNER_ACCOUNT}"


def _denied_on(pattern: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "sqs:*", "Resource": f"{ACCOUNT_QUEUES}:{pattern}"}]})


# The second-queue matrix's keys (test_auth_matrix_second_queue.py), all of the owner's account.
SECOND_QUEUE_KEYS: dict[str, dict[str, Any]] = {
    "AKIDSETUP": {"secret_access_key": "setup-secret", "account_id": OWNER_ACCOUNT, "name": "setup"},
    # A subscription `tq-a-N~tq-b-N` is matched by both patterns' ARNs as written: `tq-a-*` and `*tq-b-*`.
    "AKIDDENYFIRST": {"secret_access_key": "first-secret", "account_id": OWNER_ACCOUNT, "name": "deny-first",
                      "policy": _denied_on("tq-a-*")},
    "AKIDDENYSECOND": {"secret_access_key": "second-secret", "account_id": OWNER_ACCOUNT, "name": "deny-second",
                       "policy": _denied_on("*tq-b-*")},
    "AKIDDENYTHIRD": {"secret_access_key": "third-secret", "account_id": OWNER_ACCOUNT, "name": "deny-third",
                      "policy": _denied_on("*tq-c-*")},
    # The keys: everything but reading the dead-letter queue; and only queues named `mine*`.
    "AKIDNOREAD": {"secret_access_key": "noread-secret", "account_id": OWNER_ACCOUNT, "name": "no-read",
                   "policy": json.dumps({"Version": "2012-10-17", "Statement": [
                       {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"},
                       {"Effect": "Deny", "Action": ["sqs:ReceiveMessage", "sqs:QueueserverBrowseMessages"],
                        "Resource": f"{ACCOUNT_QUEUES}:dead-*"}]})},
    "AKIDMINE": {"secret_access_key": "mine-secret", "account_id": OWNER_ACCOUNT, "name": "mine-only",
                 "policy": json.dumps({"Version": "2012-10-17", "Statement": [
                     {"Effect": "Allow", "Action": "sqs:*", "Resource": f"{ACCOUNT_QUEUES}:mine*"}]})},
}


KEYS: dict[str, dict[str, Any]] = {
    "AKIDALICE": {"secret_access_key": "alice-secret", "account_id": OWNER_ACCOUNT, "name": "alice"},
    "AKIDBOB": {"secret_access_key": "bob-secret", "account_id": OTHER_ACCOUNT, "name": "bob"},
    "AKIDWORKER": {"secret_access_key": "worker-secret", "account_id": OWNER_ACCOUNT, "name": "jobs-worker",
                   "policy": WORKER_POLICY},
    "AKIDREDRIVER": {"secret_access_key": "redriver-secret", "account_id": OWNER_ACCOUNT, "name": "redriver",
                     "policy": REDRIVER_POLICY},
    "AKIDEVE": {"secret_access_key": "eve-secret", "account_id": THIRD_ACCOUNT, "name": "eve"},
    "AKIDMALLORY": {"secret_access_key": "mallory-secret", "account_id": OWNER_ACCOUNT, "name": "mallory",
                    "policy": DENIED_POLICY},
    # The operators': one may move the test clock, the other read /metrics.
    "AKIDOPS": {"secret_access_key": "ops-secret", "account_id": OPERATIONS_ACCOUNT, "name": "ops", "admin": True},
    "AKIDSCRAPER": {"secret_access_key": "scraper-secret", "account_id": OPERATIONS_ACCOUNT, "name": "scraper",
                    "policy": METRICS_POLICY},
    # A key of the owner's account allowed everything, in eu-west-1 only (aws:RequestedRegion).
    "AKIDEUROPE": {"secret_access_key": "europe-secret", "account_id": OWNER_ACCOUNT, "name": "europe",
                   "policy": json.dumps({"Version": "2012-10-17", "Statement": [
                       {"Effect": "Allow", "Action": "sqs:*", "Resource": "*",
                        "Condition": {"StringEquals": {"aws:RequestedRegion": "eu-west-1"}}}]})},
}
# Every key a test signs with (the second-queue matrix's server has its own file).
SIGNING_KEYS = {**KEYS, **SECOND_QUEUE_KEYS}


def credentials_toml(keys: dict[str, dict[str, Any]]) -> str:
    lines = []
    for key_id, fields in keys.items():
        lines.append(f"[keys.{key_id}]")
        lines += [f"{name} = {json.dumps(value)}" for name, value in fields.items()]
        lines.append("")
    return "\n".join(lines)


def write_credentials(path: Path, keys: dict[str, dict[str, Any]] = KEYS) -> Path:
    path.write_text(credentials_toml(keys))
    return path


def secret_of(key_id: str) -> str:
    return str(SIGNING_KEYS[key_id]["secret_access_key"])


def signed_client(protocol: str, endpoint: str, key_id: str, secret: str | None = None, *,
                  region: str = "us-east-1", token: str | None = None, verify: str | bool | None = None,
                  **config_kwargs: Any) -> Any:
    """An SQS client of `protocol` ("json" or "query") that signs with this key (and this secret)."""
    secret = secret if secret is not None else str(SIGNING_KEYS.get(key_id, {}).get("secret_access_key", "whatever"))
    if protocol == "query":
        return make_query_client(endpoint, region, aws_access_key_id=key_id, aws_secret_access_key=secret,
                                 aws_session_token=token, verify=verify, **config_kwargs)
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=45, **config_kwargs)
    return boto3.session.Session().client("sqs", region_name=region, endpoint_url=endpoint, verify=verify,
                                          aws_access_key_id=key_id, aws_secret_access_key=secret,
                                          aws_session_token=token, config=config)


def sign(request: AWSRequest, key_id: str, region: str = "us-east-1") -> AWSRequest:
    SigV4Auth(Credentials(key_id, secret_of(key_id)), "sqs", region).add_auth(request)
    return request


def presign(url: str, key_id: str, expires: int, region: str = "us-east-1", method: str = "GET",
            headers: dict[str, str] | None = None) -> str:
    """A presigned URL, as botocore's generate_presigned_url makes it (signing these headers too)."""
    request = AWSRequest(method=method, url=url, headers=headers or {})
    SigV4QueryAuth(Credentials(key_id, secret_of(key_id)), "sqs", region, expires=expires).add_auth(request)
    return str(request.url)


class _OnlySigV4Auth(SigV4Auth):
    """botocore's header signer covering only some of the request's headers (as a careless or hostile signer
    would); the others may then be added or changed without breaking the signature."""

    def __init__(self, credentials: Credentials, region: str, names: set[str]) -> None:
        super().__init__(credentials, "sqs", region)
        self._names = names

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        headers = super().headers_to_sign(request)
        for name in {name.lower() for name in headers.keys()} - self._names:
            del headers[name]
        return headers


class _OnlySigV4QueryAuth(SigV4QueryAuth):
    """botocore's presigner covering only `names` (None: all it would), and without X-Amz-Expires if asked."""

    def __init__(self, credentials: Credentials, region: str, expires: int, names: set[str] | None,
                 with_expiry: bool) -> None:
        super().__init__(credentials, "sqs", region, expires=expires)
        self._names, self._with_expiry = names, with_expiry

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        headers = super().headers_to_sign(request)
        if self._names is not None:
            for name in {name.lower() for name in headers.keys()} - self._names:
                del headers[name]
        return headers

    def _modify_request_before_signing(self, request: AWSRequest) -> None:
        super()._modify_request_before_signing(request)
        if not self._with_expiry:  # before the canonical request is made: the signature covers its absence
            request.url = re.sub(r"X-Amz-Expires=\d+&?", "", request.url)


def sign_only(request: AWSRequest, key_id: str, names: set[str], region: str = "us-east-1") -> AWSRequest:
    """Sign with SigV4 covering only the headers `names` (lower-case)."""
    _OnlySigV4Auth(Credentials(key_id, secret_of(key_id)), region, names).add_auth(request)
    return request


def presign_only(url: str, key_id: str, *, names: set[str] | None = None, expires: int = 300,
                 with_expiry: bool = True, method: str = "GET", headers: dict[str, str] | None = None) -> str:
    """A presigned URL signing only the headers `names`, or lacking X-Amz-Expires (`with_expiry=False`)."""
    request = AWSRequest(method=method, url=url, headers=headers or {})
    _OnlySigV4QueryAuth(Credentials(key_id, secret_of(key_id)), "us-east-1", expires, names,
                        with_expiry).add_auth(request)
    return str(request.url)


def add_unsigned_headers(client: Any, headers: dict[str, str]) -> Any:
    """Make `client` add these headers to every request after signing it (as a proxy, or a tamperer, would)."""
    def add(request: Any, **_: Any) -> None:
        for name, value in headers.items():
            request.headers[name] = value

    client.meta.events.register("before-send.sqs", add)
    return client


def send(request: AWSRequest, body: bytes | None = None, headers: dict[str, str] | None = None,
         context: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], bytes]:
    """Send a prepared request (with `body` instead of the signed one, or `headers` added, to tamper; `context`
    to verify HTTPS); status, headers, body."""
    data = request.body if body is None else body
    response = wire.send(request.url, request.method, data or None, {**dict(request.headers.items()), **(headers or {})},
                         timeout=10, context=context)
    return response.status, response.headers, response.body


def refusal(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, str]:
    """The status and error code of an answer from `send` (its `x-amzn-query-error`, in either protocol)."""
    status, headers, _ = answer
    return status, headers.get("x-amzn-query-error", "").partition(";")[0]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_test_ca(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a certificate it signed for 127.0.0.1: (ca.pem, server.pem, server.key)."""
    ca_key, ca, key, csr, cert = (folder / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
             "-days", "2", "-subj", "/CN=queueserver test CA")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    extensions = folder / "san.ext"
    extensions.write_text("subjectAltName = IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "2", "-extfile", str(extensions))
    return ca, cert, key


def json_request(endpoint: str, action: str, params: dict[str, Any]) -> AWSRequest:
    return AWSRequest(method="POST", url=endpoint + "/", data=json.dumps(params).encode(), headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"})


class SignedClock(ClockControl):
    """The test clock of a server with credentials on: its endpoint wants a signed request of an admin key."""

    def __init__(self, endpoint: str, key_id: str = "AKIDOPS") -> None:
        super().__init__(endpoint)
        self._key_id = key_id

    def _call(self, method: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(payload).encode() if payload is not None else None
        status, _, body = send(sign(AWSRequest(method=method, url=self.url, data=data,
                                               headers={"Content-Type": "application/json"}), self._key_id))
        assert status == 200, body
        result: dict[str, Any] = json.loads(body)
        return result

    def ahead_s(self) -> float:
        """How far the server's clock is ahead of this machine's (what earlier tests advanced it by)."""
        return (self.now_ms() - time.time() * 1000) / 1000


# The signed ways a request comes in: the JSON protocol, a Query form POST, a Query GET signed in its
# Authorization header, and a presigned Query GET (the signature in the query string).
WAYS = ("json", "query-post", "query-get", "presigned")


def query_pairs(action: str, members: dict[str, Any]) -> list[tuple[str, str]]:
    """An action's JSON-shaped members in the Query form: lists `Name.N`, maps `Name.N.Name/Value` (tags:
    `Key/Value`), lists of structures `Name.N.Member`; the server takes the members' own names as aliases."""
    pairs = [("Action", action), ("Version", "2012-11-05")]
    for name, value in members.items():
        if isinstance(value, list):
            for index, item in enumerate(value, 1):
                if isinstance(item, dict):
                    pairs += [(f"{name}.{index}.{key}", str(v)) for key, v in item.items()]
                else:
                    pairs.append((f"{name}.{index}", str(item)))
        elif isinstance(value, dict):
            key_name = "Key" if name == "Tags" else "Name"
            for index, (key, v) in enumerate(value.items(), 1):
                pairs += [(f"{name}.{index}.{key_name}", key), (f"{name}.{index}.Value", str(v))]
        else:
            pairs.append((name, str(value)))
    return pairs


def signed_call(way: str, endpoint: str, key_id: str, action: str, members: dict[str, Any],
                region: str = "us-east-1") -> wire.RawResponse:
    """One request of `action` signed with `key_id`, the way `way` (one of WAYS) sends it."""
    url = endpoint.rstrip("/") + "/"
    if way == "json":
        request = sign(json_request(endpoint, action, members), key_id, region)
    elif way == "query-post":
        request = sign(AWSRequest(method="POST", url=url, data=urlencode(query_pairs(action, members)).encode(),
                                  headers={"Content-Type": wire.FORM}), key_id, region)
    elif way == "query-get":
        request = sign(AWSRequest(method="GET", url=f"{url}?{urlencode(query_pairs(action, members))}"), key_id,
                       region)
    elif way == "presigned":
        request = AWSRequest(method="GET", url=presign(f"{url}?{urlencode(query_pairs(action, members))}",
                                                       key_id, 300, region))
    else:
        raise ValueError(f"no way in called {way!r}")
    return wire.send(request.url, request.method, request.body or None, dict(request.headers.items()), timeout=30)


def access_denied(response: wire.RawResponse) -> bool:
    """Whether the answer is SQS's AccessDenied (403), in either protocol."""
    return response.status == 403 and wire.error_code(response) == "AccessDenied"
