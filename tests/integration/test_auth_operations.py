"""The server's own endpoints with credentials on: /metrics for a key allowed queueserver:GetMetrics (or
unsigned on the --metrics-listen listener, under the same connection limits), and the test clock, which
takes only a finite advance within its bound and, with credentials, moves only for an admin key."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from botocore.awsrequest import AWSRequest
from support.auth import KEYS, credentials_toml, presign, send, sign, signed_client, write_credentials
from support.metrics import Scrape, metrics_address
from support.net import answered, connect, read_until_closed, status_of
from support.server import ClockControl, try_serve, wait_for
from support.wire import RawResponse, query_post
from support.wire import send as send_raw

from queueserver.clock import MAX_ADVANCE_SECONDS


def signed_get(endpoint: str, path: str, key_id: str) -> tuple[int, bytes]:
    status, _, body = send(sign(AWSRequest(method="GET", url=endpoint + path), key_id))
    return status, body


def code_of(body: bytes) -> str:
    return str(json.loads(body)["code"])


def test_metrics_with_credentials_want_a_signed_key_whose_identity_policy_allows_get_metrics(auth_server, alice):
    alice.create_queue(QueueName="counted")
    anonymous = send_raw(auth_server.endpoint + "/metrics", "GET", None, {})
    assert (anonymous.status, code_of(anonymous.body)) == (403, "MissingAuthenticationToken")
    for key_id in ("AKIDALICE", "AKIDBOB", "AKIDOPS", "AKIDMALLORY"):  # no grant, or an explicit deny
        status, body = signed_get(auth_server.endpoint, "/metrics", key_id)
        assert (status, code_of(body)) == (403, "AccessDenied"), key_id
        assert "queueserver:GetMetrics" in json.loads(body)["message"] and b"counted" not in body
    status, body = signed_get(auth_server.endpoint, "/metrics", "AKIDSCRAPER")
    assert status == 200
    assert Scrape(body.decode()).value("queueserver_messages_sent_total", queue="counted", region="us-east-1",
                                       account="111111111111") == 0
    presigned = send_raw(presign(auth_server.endpoint + "/metrics", "AKIDSCRAPER", 60), "GET", None, {})
    assert presigned.status == 200 and b"queueserver_ready" in presigned.body
    for path in ("/health", "/ready"):  # they name nothing: open to probes
        assert send_raw(auth_server.endpoint + path, "GET", None, {}).status == 200


def test_the_metrics_listener_serves_only_metrics_health_and_ready_unsigned(server_factory, tmp_path):
    keys = write_credentials(tmp_path / "keys.toml")
    server = server_factory(tmp_path / "q.db", "--test-clock", "--credentials", str(keys),
                            "--metrics-listen", "127.0.0.1:0")
    metrics = metrics_address(server)
    assert metrics != server.endpoint
    signed_client("json", server.endpoint, "AKIDALICE").create_queue(QueueName="scraped")
    scraped = send_raw(metrics + "/metrics", "GET", None, {})
    assert scraped.status == 200 and 'queue="scraped"' in scraped.body.decode()
    for path in ("/health", "/ready"):
        assert send_raw(metrics + path, "GET", None, {}).status == 200
    # Nothing else is served there: not the API (however signed), the console, the clock, other methods.
    signed = sign(AWSRequest(method="POST", url=metrics + "/", data=b"{}", headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"}), "AKIDALICE")
    refused = [send_raw(signed.url, "POST", signed.body, dict(signed.headers.items())),
               send_raw(metrics + "/console/", "GET", None, {}),
               send_raw(metrics + "/_queueserver/clock", "POST", b'{"advance_seconds": 60}', {}),
               send_raw(metrics + "/metrics", "POST", b"", {}),
               query_post(metrics, {"Action": "ListQueues"})]
    assert [r.status for r in refused] == [404] * len(refused)
    # The main listener still wants a signature, and a web page is refused on both, as the API is.
    assert send_raw(server.endpoint + "/metrics", "GET", None, {}).status == 403
    assert send_raw(metrics + "/metrics", "GET", None, {"Sec-Fetch-Site": "cross-site"}).status == 403
    server.stop()


@pytest.mark.parametrize("first", ["main", "metrics"])
def test_the_metrics_listeners_connections_count_against_the_same_connection_limit(server_factory, tmp_path, first):
    limit = 4
    server = server_factory(tmp_path / "limit.db", "--max-connections", str(limit), "--max-connections-per-address",
                            str(limit), "--metrics-listen", "127.0.0.1:0")
    endpoints = {"main": server.endpoint, "metrics": metrics_address(server)}
    second = "metrics" if first == "main" else "main"
    held = [connect(endpoints[first]) for _ in range(limit)]
    try:
        for sock in held:  # each connection is accepted and answered: all of them are open now
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            wait_for(lambda: answered(sock), "an answer on a held connection")
            assert status_of(sock.recv(65536)) == 200
        extra = connect(endpoints[second])
        with extra:
            assert read_until_closed(extra).startswith(b"HTTP/1.1 503 Service Unavailable")
    finally:
        for sock in held:
            sock.close()
    wait_for(lambda: send_raw(endpoints[second] + "/health", "GET", None, {}).status == 200, "a freed connection")
    server.stop()


@pytest.mark.parametrize("address", ["9325", "localhost", "127.0.0.1:99999", ":9325", "127.0.0.1:port"])
def test_a_metrics_listen_setting_that_is_not_host_and_port_stops_the_start(tmp_path, address):
    refusal = try_serve(tmp_path / "never.db", "--metrics-listen", address)
    assert refusal.returncode == 2
    assert f"metrics_listen: expected HOST:PORT, got {address!r}" in refusal.stderr


def test_a_metrics_listen_address_in_use_stops_the_start_with_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        refusal = try_serve(tmp_path / "never.db", "--metrics-listen", f"127.0.0.1:{taken.getsockname()[1]}")
    assert refusal.returncode == 2
    assert "queueserver: --metrics-listen 127.0.0.1:" in refusal.stderr and "Traceback" not in refusal.stderr


# -- the test clock ------------------------------------------------------------------------

BAD_ADVANCES = [b'{"advance_seconds": NaN}', b'{"advance_seconds": Infinity}', b'{"advance_seconds": -Infinity}',
                b'{"advance_seconds": 1e300}', b'{"advance_seconds": -1}', b'{"advance_seconds": -0.001}',
                b'{"advance_seconds": %d}' % (MAX_ADVANCE_SECONDS + 1), b'{"advance_seconds": 1' + b"0" * 400 + b"}",
                b'{"advance_seconds": "5"}', b'{"advance_seconds": true}', b'{"advance_seconds": null}',
                b'{"advance_seconds": [1]}', b'{"advance_seconds": {}}', b"[60]", b'"60"', b"{", b"\xff",
                b"[" * 1000]


@pytest.mark.parametrize("body", BAD_ADVANCES, ids=lambda b: b[:40].decode("latin-1"))
def test_an_advance_that_is_not_a_finite_number_within_the_bound_is_a_400_and_moves_nothing(server, clock, body):
    before = clock.now_ms()
    answer = send_raw(server.endpoint + "/_queueserver/clock", "POST", body, {"Content-Type": "application/json"})
    assert answer.status == 400, answer.body
    message = answer.json()["message"]
    assert "advance_seconds" in message and ("number" in message or "10 years" in message), message
    assert clock.now_ms() == before


def test_the_largest_advance_is_accepted_and_the_server_serves_on_after_it(server_factory, tmp_path, make_client):
    server = server_factory(tmp_path / "far.db", "--test-clock")
    clock = ClockControl(server.endpoint)
    start = clock.now_ms()
    assert clock.advance(MAX_ADVANCE_SECONDS) == start + MAX_ADVANCE_SECONDS * 1000
    assert clock.advance(MAX_ADVANCE_SECONDS) == start + 2 * MAX_ADVANCE_SECONDS * 1000  # it may be repeated
    sqs = make_client(server.endpoint)
    url = sqs.create_queue(QueueName="later")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="twenty years on")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "twenty years on"
    server.stop()


def _clock_call(endpoint: str, method: str, key_id: str | None, payload: dict[str, Any] | None = None) -> RawResponse:
    data = json.dumps(payload).encode() if payload is not None else None
    request = AWSRequest(method=method, url=endpoint + "/_queueserver/clock", data=data,
                         headers={"Content-Type": "application/json"})
    if key_id is not None:
        sign(request, key_id)
    return send_raw(request.url, method, data, dict(request.headers.items()))


def test_with_credentials_any_key_reads_the_clock_and_only_an_admin_key_moves_it(auth_server):
    before = _clock_call(auth_server.endpoint, "GET", "AKIDBOB")
    assert before.status == 200
    now = before.json()["now_ms"]
    for key_id in ("AKIDALICE", "AKIDBOB", "AKIDSCRAPER"):
        refused = _clock_call(auth_server.endpoint, "POST", key_id, {"advance_seconds": 600})
        assert (refused.status, refused.json()["code"]) == (403, "AccessDenied"), key_id
        assert "admin = true" in refused.json()["message"]
    unsigned = _clock_call(auth_server.endpoint, "POST", None, {"advance_seconds": 600})
    assert (unsigned.status, unsigned.json()["code"]) == (403, "MissingAuthenticationToken")
    assert _clock_call(auth_server.endpoint, "GET", "AKIDALICE").json()["now_ms"] == now
    bad = _clock_call(auth_server.endpoint, "POST", "AKIDOPS", {"advance_seconds": float("nan")})
    assert bad.status == 400
    moved = _clock_call(auth_server.endpoint, "POST", "AKIDOPS", {"advance_seconds": 1})
    assert moved.status == 200 and moved.json()["now_ms"] == now + 1000
    # The refused moves moved nothing: every key's requests still fall in the 5-minute signing window.
    assert signed_client("json", auth_server.endpoint, "AKIDBOB").list_queues()["ResponseMetadata"][
        "HTTPStatusCode"] == 200


def test_an_admin_field_that_is_not_a_boolean_stops_the_start(tmp_path):
    path = tmp_path / "keys.toml"
    path.write_text(credentials_toml({"AKIDX": {**KEYS["AKIDOPS"], "admin": "yes"}}))
    refusal = try_serve(tmp_path / "never.db", "--credentials", str(path))
    assert refusal.returncode == 2
    assert "[keys.AKIDX]: admin must be true or false" in refusal.stderr

