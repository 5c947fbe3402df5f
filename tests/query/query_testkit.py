"""Plain helpers of the Query tests: hand-made Query requests (form POST or GET) and XML reading."""

from __future__ import annotations

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
class XmlResponse:
    status: int
    headers: dict[str, str]
    body: bytes

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


def _send(url: str, method: str, data: bytes | None, headers: dict[str, str]) -> XmlResponse:
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return XmlResponse(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
    except urllib.error.HTTPError as e:
        with e:
            return XmlResponse(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())


def query_post(endpoint: str, params: Any, *, path: str = "/", region: str = "us-east-1",
               sign: bool = True, content_type: str | None = FORM, version: bool = True) -> XmlResponse:
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
    return _send(url, "POST", body, headers)


def query_get(endpoint: str, params: Any, *, path: str = "/", region: str = "us-east-1",
              sign: str | None = "query") -> XmlResponse:
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
    return _send(url, "GET", None, headers)
