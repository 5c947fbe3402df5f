"""The console's guards over raw HTTP: cross-site forms and forms without the CSRF token change nothing;
--no-console leaves /console to the SQS endpoint; the default is on only on a loopback address."""

from __future__ import annotations

import http.client
import re
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from queueserver.config import ServerConfig


def _request(server: Any, method: str, path: str, body: str = "", headers: dict[str, str] | None = None
             ) -> tuple[int, dict[str, str], str]:
    address = urlsplit(server.endpoint)
    conn = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    try:
        conn.request(method, path, body=body.encode(), headers={
            "content-type": "application/x-www-form-urlencoded", **(headers or {})})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
    finally:
        conn.close()


def _token(server: Any) -> str:
    status, headers, _ = _request(server, "GET", "/console")
    assert status == 200
    match = re.search(r"qs_console_csrf=([^;]+)", headers["set-cookie"])
    assert match is not None
    return match.group(1)


def _create_form(server: Any, name: str, token: str) -> str:
    return urlencode({"csrf_token": token, "name": name, "region": "us-east-1"})


def _queue_exists(console_sqs: Any, name: str) -> bool:
    return bool(console_sqs.list_queues(QueueNamePrefix=name).get("QueueUrls"))


def test_a_same_origin_form_with_its_token_creates_the_queue(console_server: Any, console_sqs: Any) -> None:
    token = _token(console_server)
    status, headers, _ = _request(console_server, "POST", "/console/create", _create_form(console_server, "guard-ok", token),
                                  {"cookie": f"qs_console_csrf={token}", "origin": console_server.endpoint,
                                   "sec-fetch-site": "same-origin"})
    assert (status, headers["location"]) == (
        303, "/console/queues/us-east-1/000000000000/guard-ok?notice=Queue+guard-ok+created.")
    assert _queue_exists(console_sqs, "guard-ok")


@pytest.mark.parametrize("headers", [
    {"origin": "http://evil.example"},
    {"origin": "null"},
    {"sec-fetch-site": "cross-site"},
    {"sec-fetch-site": "same-site"},
], ids=["foreign origin", "opaque origin", "cross-site", "same-site"])
def test_a_form_posted_from_another_site_is_refused_even_with_the_token(
        console_server: Any, console_sqs: Any, headers: dict[str, str]) -> None:
    token = _token(console_server)
    status, _, body = _request(console_server, "POST", "/console/create", _create_form(console_server, "guard-x", token),
                               {"cookie": f"qs_console_csrf={token}", **headers})
    assert status == 403, body
    assert not _queue_exists(console_sqs, "guard-x")


@pytest.mark.parametrize("cookie,field", [("", ""), ("", "A" * 43), ("A" * 43, ""), ("A" * 43, "B" * 43)],
                         ids=["neither", "no cookie", "no field", "different"])
def test_a_form_without_a_matching_token_is_refused(console_server: Any, console_sqs: Any, cookie: str,
                                                    field: str) -> None:
    headers = {"origin": console_server.endpoint, **({"cookie": f"qs_console_csrf={cookie}"} if cookie else {})}
    status, _, _ = _request(console_server, "POST", "/console/create",
                            _create_form(console_server, "guard-token", field), headers)
    assert status == 403
    assert not _queue_exists(console_sqs, "guard-token")


def test_another_site_may_link_to_a_page_but_not_load_it_into_its_own(console_server: Any) -> None:
    navigate = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
    assert _request(console_server, "GET", "/console", headers=navigate)[0] == 200
    embedded = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"}
    assert _request(console_server, "GET", "/console", headers=embedded)[0] == 403


def test_pages_forbid_framing_and_inline_scripts(console_server: Any) -> None:
    _, headers, _ = _request(console_server, "GET", "/console")
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "script-src" not in headers["content-security-policy"]  # default-src 'self': no inline script
    assert headers["x-frame-options"] == "DENY"


def test_with_no_console_the_path_is_left_to_the_sqs_endpoint(server_factory: Any, tmp_path: Any) -> None:
    server = server_factory(tmp_path / "q.db", "--no-console")
    status, headers, body = _request(server, "GET", "/console")
    assert status == 400 and "<html" not in body  # an SQS error: no action named
    server.stop()


@pytest.mark.parametrize("host,console,enabled", [
    ("127.0.0.1", None, True), ("::1", None, True), ("localhost", None, True), ("0.0.0.0", None, False),
    ("192.168.1.5", None, False), ("0.0.0.0", True, True), ("127.0.0.1", False, False),
])
def test_the_console_is_on_by_default_only_on_loopback(host: str, console: bool | None, enabled: bool) -> None:
    assert ServerConfig(host=host, console=console).console_enabled is enabled
