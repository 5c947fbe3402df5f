"""A person who opens the server's address in a browser reaches the console, and the browser's icon request
is answered; SDK requests to the same paths are answered as before, over both protocols."""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from support.metrics import scrape
from support.wire import RawResponse, error_code, query_get, send

pytestmark = pytest.mark.server_process

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"  # what chromium sends


def _get(endpoint: str, path: str, accept: str) -> tuple[int, dict[str, str], bytes]:
    """One GET, redirects not followed: (status, headers with lower-case names, body)."""
    address = urlsplit(endpoint)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=15)
    try:
        connection.request("GET", path, headers={"Accept": accept})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _client_errors(endpoint: str) -> float:
    return sum(value for labels, value in scrape(endpoint).labelled("queueserver_requests_total").items()
               if ("outcome", "client_error") in labels)


def test_a_browser_opening_the_address_is_sent_to_the_console(server: Any) -> None:
    status, headers, _ = _get(server.endpoint, "/", BROWSER_ACCEPT)
    assert (status, headers["location"]) == (302, "/console/")
    status, headers, body = _get(server.endpoint, headers["location"], BROWSER_ACCEPT)
    assert status == 200 and headers["content-type"].startswith("text/html") and b"<h1>Queues</h1>" in body


def test_sdk_requests_to_the_address_are_answered_as_before(server: Any, make_client: Any, queue_name: str) -> None:
    sqs = make_client(server.endpoint)
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    assert url in sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"]
    # A Query GET names its action: the answer is the action's, even to a browser that asks for HTML.
    listed = query_get(server.endpoint, {"Action": "ListQueues", "QueueNamePrefix": queue_name})
    assert listed.status == 200 and listed.texts("ListQueuesResult/QueueUrl") == [url]
    status, _, body = _get(server.endpoint, f"/?{urlencode({'Action': 'ListQueues', 'QueueNamePrefix': queue_name})}",
                           BROWSER_ACCEPT)
    assert status == 200 and RawResponse(status, {}, body).texts("ListQueuesResult/QueueUrl") == [url]
    # A GET with no action that does not ask for HTML is the SQS request it always was.
    missing = send(server.endpoint + "/", "GET", None, {"Accept": "*/*"})
    assert (missing.status, error_code(missing)) == (400, "MissingAction")


def test_without_the_console_a_browser_gets_the_sqs_answer(server_factory: Any, tmp_path: Any) -> None:
    quiet = server_factory(tmp_path / "no-console.db", "--no-console")
    status, headers, body = _get(quiet.endpoint, "/", BROWSER_ACCEPT)
    assert status == 400 and "location" not in headers and b"MissingAction" in body


def test_the_icon_is_served_and_not_counted_as_a_client_error(server: Any) -> None:
    before = _client_errors(server.endpoint)
    status, headers, body = _get(server.endpoint, "/favicon.ico", "image/avif,image/webp,image/*,*/*;q=0.8")
    assert (status, headers["content-type"]) == (200, "image/x-icon")
    assert body[:4] == b"\x00\x00\x01\x00"  # an ICO file's header
    assert _client_errors(server.endpoint) == before
