"""Hand-made requests in either wire protocol, for what boto3 refuses to build (garbage bodies,
lone surrogates, control characters, unsigned or oddly signed requests), and reading them back:
JSON calls, Query form POSTs and GETs, and the XML of the answers."""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

NS = "http://queue.amazonaws.com/doc/2012-11-05/"
FORM = "application/x-www-form-urlencoded; charset=utf-8"


@dataclass
class RawResponse:
    """One answer as it came: status, headers (lower-case names), body; read as JSON or as XML."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def root(self) -> ET.Element:
        return ET.fromstring(self.body)

    def text(self, path: str) -> str | None:
        """The text of the first element at `path` ("Result/Message/Body"; namespace implied)."""
        node = self.root.find(_qualified(path))
        return None if node is None else (node.text or "")

    def texts(self, path: str) -> list[str]:
        return [node.text or "" for node in self.root.findall(_qualified(path))]


def _qualified(path: str) -> str:
    return "/".join(f"{{{NS}}}{part}" if part not in (".", "..") else part for part in path.split("/"))


def send(url: str, method: str, data: bytes | None, headers: dict[str, str], timeout: float = 30,
         context: ssl.SSLContext | None = None) -> RawResponse:
    """Send one request and return what came back (never raises on 4xx/5xx); `context` verifies HTTPS."""
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return RawResponse(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
    except urllib.error.HTTPError as e:
        with e:
            return RawResponse(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())


def query_post(endpoint: str, params: Any, *, path: str = "/", region: str = "us-east-1",
               sign: bool = True, content_type: str | None = FORM, version: bool = True) -> RawResponse:
    """POST a form body (params: a dict, a list of pairs, or raw bytes), SigV4-signed in the header."""
    if isinstance(params, bytes):
        body = params
    else:
        pairs = list(params.items()) if isinstance(params, dict) else list(params)
        if version:
            pairs.append(("Version", "2012-11-05"))
        body = urlencode(pairs).encode("ascii")
    url = endpoint.rstrip("/") + path
    headers = {"Content-Type": content_type} if content_type else {}
    if sign:
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(Credentials("test", "test"), "sqs", region).add_auth(request)
        headers = dict(request.headers.items())
    return send(url, "POST", body, headers)


def query_get(endpoint: str, params: Any, *, path: str = "/", region: str = "us-east-1",
              sign: str | None = "query") -> RawResponse:
    """GET with the parameters in the query string, signed there (`sign="query"`), in the header, or not."""
    pairs = list(params.items()) if isinstance(params, dict) else list(params)
    pairs.append(("Version", "2012-11-05"))
    url = f"{endpoint.rstrip('/')}{path}?{urlencode(pairs)}"
    headers: dict[str, str] = {}
    if sign:
        request = AWSRequest(method="GET", url=url)
        if sign == "query":
            SigV4QueryAuth(Credentials("test", "test"), "sqs", region, expires=300).add_auth(request)
        else:
            SigV4Auth(Credentials("test", "test"), "sqs", region).add_auth(request)
        url = request.url
        headers = dict(request.headers.items())
    return send(url, "GET", None, headers)


# --- AWS JSON 1.0 -----------------------------------------------------------------

def raw_request(
    endpoint: str,
    body: bytes,
    *,
    target: str | None = None,
    content_type: str = "application/x-amz-json-1.0",
    region: str = "us-east-1",
    sign: bool = True,
    method: str = "POST",
    path: str = "/",
    timeout: float = 30,
) -> RawResponse:
    """Send one hand-made request and return status, headers and body (never raises on 4xx/5xx)."""
    url = endpoint.rstrip("/") + path
    headers = {"Content-Type": content_type}
    if target is not None:
        headers["X-Amz-Target"] = target
    if sign:
        aws_req = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(Credentials("test", "test"), "sqs", region).add_auth(aws_req)
        headers = dict(aws_req.headers.items())
    return send(url, method, body if method != "GET" else None, headers, timeout)


def raw_json_call(endpoint: str, action: str, payload: Any, **kwargs: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
    return raw_request(endpoint, body, target=f"AmazonSQS.{action}", **kwargs)


def call_json(endpoint: str, action: str, payload: dict[str, Any]) -> RawResponse:
    body = json.dumps(payload).encode()  # ensure_ascii: a lone surrogate travels as \ud800
    return raw_json_call(endpoint, action, body)


def call_query(endpoint: str, action: str, fields: dict[str, str], path: str = "/") -> RawResponse:
    encoded = {name: value.encode("utf-8", "surrogatepass") for name, value in fields.items()}
    body = urlencode({"Action": action, "Version": "2012-11-05", **encoded}).encode()
    return raw_request(endpoint, body, content_type="application/x-www-form-urlencoded", path=path)


def error_code(response: RawResponse) -> str:
    """The code botocore reports as Error.Code: over JSON the x-amzn-query-error header's (else the
    `__type` shape), over Query the <Code>."""
    if response.headers.get("content-type", "").startswith("application/x-amz-json"):
        legacy = response.headers.get("x-amzn-query-error", "")
        return legacy.partition(";")[0] or str(response.json()["__type"]).rpartition("#")[2]
    match = re.search(rb"<Code>([^<]*)</Code>", response.body)
    assert match, response.body[:300]
    return match.group(1).decode()
