"""Browser safety without credentials: a web page may not drive the server through a
visitor's browser, unless its origin is allowed, which then gets proper CORS answers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from support.sqs import unique_queue_name
from support.wire import RawResponse
from support.wire import error_code

pytestmark = pytest.mark.server_process

ALLOWED = "https://app.example.com"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from support.server import start_server

    db = tmp_path_factory.mktemp("browsers") / "browsers.db"
    proc = start_server(db, "--allow-origin", ALLOWED, "--allow-host", "127.0.0.1,localhost")
    yield proc
    proc.stop()


def _http(endpoint: str, method: str, path: str, headers: dict[str, str], body: bytes | None = None) -> RawResponse:
    request = urllib.request.Request(endpoint + path, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return RawResponse(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read())
    except urllib.error.HTTPError as error:
        with error:
            return RawResponse(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())


def _form(action: str, **fields: str) -> bytes:
    return "&".join([f"Action={action}", *(f"{k}={v}" for k, v in fields.items())]).encode()


def _exists(sqs: Any, url: str) -> bool:
    return url in sqs.list_queues().get("QueueUrls", [])


def test_a_cross_site_form_post_cannot_delete_a_queue(guarded, make_client):
    sqs = make_client(guarded.endpoint)
    url = sqs.create_queue(QueueName=unique_queue_name("form"))["QueueUrl"]
    response = _http(guarded.endpoint, "POST", "/", {
        "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
        "Content-Type": "application/x-www-form-urlencoded"}, _form("DeleteQueue", QueueUrl=url))
    assert response.status == 403 and error_code(response) == "AccessDenied"
    assert _exists(sqs, url)


def test_a_cross_site_get_from_an_img_tag_cannot_purge_a_queue(guarded, make_client):
    sqs = make_client(guarded.endpoint)
    url = sqs.create_queue(QueueName=unique_queue_name("img"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="keep me")
    path = url.removeprefix(guarded.endpoint) + "?Action=PurgeQueue"
    response = _http(guarded.endpoint, "GET", path, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors",
                                                     "Sec-Fetch-Dest": "image"})
    assert response.status == 403 and error_code(response) == "AccessDenied"
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "keep me"


def test_a_json_request_with_a_foreign_origin_is_refused_in_json(guarded):
    response = _http(guarded.endpoint, "POST", "/", {
        "Origin": "http://localhost.evil.example", "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AmazonSQS.CreateQueue"}, json.dumps({"QueueName": unique_queue_name("o")}).encode())
    assert response.status == 403 and error_code(response) == "AccessDenied"
    assert "access-control-allow-origin" not in response.headers


def test_the_allowed_origin_gets_its_preflight_answered_and_its_requests_served_with_cors(guarded):
    preflight = _http(guarded.endpoint, "OPTIONS", "/", {
        "Origin": ALLOWED, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-amz-target,x-amz-date,authorization"})
    assert preflight.status == 200
    assert preflight.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "x-amz-target" in preflight.headers["access-control-allow-headers"]

    name = unique_queue_name("cors")
    response = _http(guarded.endpoint, "POST", "/", {
        "Origin": ALLOWED, "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AmazonSQS.CreateQueue"}, json.dumps({"QueueName": name}).encode())
    assert response.status == 200 and response.json()["QueueUrl"].endswith(name)
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert "x-amzn-requestid" in response.headers["access-control-expose-headers"]


def test_a_preflight_from_a_foreign_origin_is_refused(guarded):
    response = _http(guarded.endpoint, "OPTIONS", "/", {
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert response.status == 403
    assert "access-control-allow-origin" not in response.headers


def test_a_same_origin_or_typed_in_request_is_served(guarded):
    for site in ("same-origin", "none"):
        response = _http(guarded.endpoint, "GET", "/?Action=ListQueues", {"Sec-Fetch-Site": site})
        assert response.status == 200, (site, response.body[:300])


def test_a_host_outside_the_allow_list_is_refused_and_never_echoed_into_a_queue_url(guarded, make_client):
    name = unique_queue_name("rebind")
    response = _http(guarded.endpoint, "POST", "/", {
        "Host": "attacker.example:9324", "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AmazonSQS.CreateQueue"}, json.dumps({"QueueName": name}).encode())
    assert response.status == 403 and error_code(response) == "AccessDenied"
    sqs = make_client(guarded.endpoint)  # 127.0.0.1 is on the list
    assert not any(url.endswith(name) for url in sqs.list_queues().get("QueueUrls", []))


def test_the_test_clock_cannot_be_moved_by_a_web_page(guarded):
    response = _http(guarded.endpoint, "POST", "/_queueserver/clock", {
        "Origin": "https://evil.example", "Content-Type": "text/plain"}, b'{"advance_seconds": 3600}')
    assert response.status == 403
