"""Limits on what one client may hold: the request body (on every route of the app's route table),
the head, the time to send them, idle keep-alive, and the number of connections; each against a
real server process, with its memory read from /proc for oversize bodies and its descriptors
counted for a flood."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from queueserver.app import ROUTES, RouteRule
from support.metrics import Scrape, metrics_address
from support.auth import make_test_ca
from support.net import answered, connect, memory_kib, open_descriptors, read_until_closed, status_of
from support.server import wait_for
from support.sqs import unique_queue_name
from support.wire import raw_json_call

pytestmark = pytest.mark.server_process

DEADLINE_S = 1.5  # --header-timeout, --body-timeout and --keep-alive-timeout of the server below
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def request_limited(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from support.server import start_server

    db = tmp_path_factory.mktemp("limits") / "limits.db"
    proc = start_server(db, "--test-clock", "--header-timeout", str(DEADLINE_S), "--body-timeout", str(DEADLINE_S),
                        "--keep-alive-timeout", str(DEADLINE_S))
    yield proc
    proc.stop()
    assert "Traceback" not in proc.stderr_text(), proc.stderr_text()


def _head(length: str = "", extra: str = "") -> bytes:
    return (f"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\n"
            f"X-Amz-Target: AmazonSQS.ListQueues\r\n{length}{extra}\r\n").encode()


def _still_serves(server: Any) -> None:
    assert raw_json_call(server.endpoint, "ListQueues", {}).status == 200


def _stream_until_answered(sock: socket.socket, chunk: bytes, most: int, chunked: bool) -> int:
    """Send body bytes until the server answers or MOST are sent; returns the bytes sent."""
    sent = 0
    while sent < most and not answered(sock):
        try:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += len(chunk)
    return sent


@pytest.mark.parametrize("how", ["Content-Length of 1 GB", "chunked without end"])
def test_an_oversize_body_is_refused_with_a_413_before_it_is_held_in_memory(request_limited, how):
    pid = request_limited.pid
    before = memory_kib(pid)
    sock = connect(request_limited.endpoint)
    with sock:
        if how == "chunked without end":
            sock.sendall(_head(extra="Transfer-Encoding: chunked\r\n"))
        else:
            sock.sendall(_head(f"Content-Length: {1024 * MIB}\r\n"))
        sent = _stream_until_answered(sock, b"x" * MIB, 256 * MIB, chunked=how.startswith("chunked"))
        response = read_until_closed(sock)
    assert status_of(response) == 413, response[:300]
    assert b"RequestEntityTooLarge" in response and b"connection: close" in response.lower()
    after = memory_kib(pid)
    # the server holds at most one limit's worth (4 MiB) plus read buffers, never what was sent
    assert after["VmHWM"] - before["VmHWM"] < 48 * 1024, (before, after, f"{sent} bytes sent")
    _still_serves(request_limited)


def _requests_reaching(rule: RouteRule) -> list[tuple[str, str]]:
    """(method, path) of requests the app routes by RULE: each method it serves (POST if any), on its
    path and, for a prefix, on a path under it."""
    methods = sorted(rule.methods) if rule.methods is not None else ["POST"]
    paths = [rule.path] if not rule.prefix else [rule.path, rule.path.rstrip("/") + "/000000000000/some-name"]
    return [(method, path) for method in methods for path in paths]


ROUTED = [(rule.name, method, path) for rule in ROUTES for method, path in _requests_reaching(rule)]


def _shaped_head(method: str, path: str, framing: str) -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n" \
           f"{framing}\r\n".encode()


@pytest.mark.parametrize(("route", "method", "path"), ROUTED, ids=[f"{r} {m} {p}" for r, m, p in ROUTED])
def test_every_route_reads_its_body_through_the_one_door(request_limited, route, method, path):
    """Whatever a route does with a body (SQS decodes it, the console checks a CSRF token in it, /ready
    ignores it), no body reaches it past its limit: a chunked one is refused as it streams, a declared
    one before it is read, and bytes sent without a length are not a body at all."""
    pid = request_limited.pid
    before = memory_kib(pid)
    with connect(request_limited.endpoint) as sock:  # a chunked body that would never end
        sock.sendall(_shaped_head(method, path, "Transfer-Encoding: chunked\r\n"))
        sent = _stream_until_answered(sock, b"a=" + b"x" * (MIB - 2), 64 * MIB, chunked=True)
        response = read_until_closed(sock)
    assert status_of(response) == 413, (sent, response[:300])
    if route == "sqs":
        assert b"RequestEntityTooLarge" in response, response[:300]
    with connect(request_limited.endpoint) as sock:  # a declared body of 1 GiB: refused before any of it
        sock.sendall(_shaped_head(method, path, f"Content-Length: {1024 * MIB}\r\n"))
        response = read_until_closed(sock)
    assert status_of(response) == 413, response[:300]
    with connect(request_limited.endpoint) as sock:  # no length: what follows the head is no body of it
        sock.sendall(_shaped_head(method, path, ""))
        sent = _stream_until_answered(sock, b"x" * MIB, 64 * MIB, chunked=False)
        read_until_closed(sock)  # answered (the head, then 400 for the bytes that are no request), and closed
    assert sent < 64 * MIB, "the server kept reading bytes that belong to no request"
    after = memory_kib(pid)
    assert after["VmHWM"] - before["VmHWM"] < 48 * 1024, (before, after)
    _still_serves(request_limited)


def test_a_1_gib_chunked_post_to_the_console_login_is_refused_early_with_memory_flat(request_limited):
    """No login and no CSRF token: the form limit is reached long before anything of the form is read."""
    pid = request_limited.pid
    before = memory_kib(pid)
    with connect(request_limited.endpoint) as sock:
        sock.sendall(_shaped_head("POST", "/console/login", "Transfer-Encoding: chunked\r\n"))
        sent = _stream_until_answered(sock, b"x" * MIB, 1024 * MIB, chunked=True)
        response = read_until_closed(sock)
    assert status_of(response) == 413, response[:300]
    assert sent < 64 * MIB, f"{sent} bytes were sent before the refusal"
    after = memory_kib(pid)
    assert after["VmHWM"] - before["VmHWM"] < 16 * 1024, (before, after)
    assert after["VmRSS"] - before["VmRSS"] < 16 * 1024, (before, after)
    _still_serves(request_limited)


def test_an_oversize_query_request_gets_its_413_as_query_xml(request_limited):
    with connect(request_limited.endpoint) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                     b"Content-Length: %d\r\n\r\nAction=SendMessage&MessageBody=" % (5 * MIB))
        response = read_until_closed(sock)
    assert status_of(response) == 413, response[:300]
    assert b"<Code>RequestEntityTooLarge</Code>" in response and b"<ErrorResponse" in response


def test_eight_parallel_100_mb_bodies_are_refused_without_growing_the_server(request_limited):
    pid = request_limited.pid
    before = memory_kib(pid)
    statuses: list[int] = []

    def upload() -> None:
        with connect(request_limited.endpoint) as sock:
            sock.sendall(_head(extra="Transfer-Encoding: chunked\r\n"))
            _stream_until_answered(sock, b"y" * MIB, 100 * MIB, chunked=True)
            statuses.append(status_of(read_until_closed(sock)))

    threads = [threading.Thread(target=upload) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert statuses == [413] * 8
    assert memory_kib(pid)["VmHWM"] - before["VmHWM"] < 96 * 1024, (before, memory_kib(pid))
    _still_serves(request_limited)


def test_the_largest_sqs_message_in_its_widest_encoding_fits_under_the_body_limit(request_limited, make_client):
    """1 MiB of two-byte characters is 3 MiB as JSON \\u escapes or as percent-encoded form data."""
    sqs = make_client(request_limited.endpoint)
    url = sqs.create_queue(QueueName=unique_queue_name("wide"))["QueueUrl"]
    body = "é" * (MIB // 2)
    sqs.send_message(QueueUrl=url, MessageBody=body)
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == body
    with pytest.raises(sqs.exceptions.ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody=body + "e")
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"  # SQS's own answer, not a 413


@pytest.mark.parametrize("head", [
    "200 headers", "one 20 KB header", "a 20 KB URL"])
def test_a_head_over_the_size_or_count_limit_gets_431_and_the_server_serves_on(request_limited, head):
    with connect(request_limited.endpoint) as sock:
        if head == "200 headers":
            sock.sendall(_head("Content-Length: 0\r\n", "".join(f"X-H{i}: v\r\n" for i in range(200))))
        elif head == "one 20 KB header":
            sock.sendall(_head("Content-Length: 0\r\n", f"X-Big: {'v' * 20_000}\r\n"))
        else:
            sock.sendall(f"GET /?{'a' * 20_000} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        response = read_until_closed(sock)
    assert status_of(response) == 431, response[:300]
    _still_serves(request_limited)


def test_a_client_that_expects_100_continue_is_told_to_go_on_and_then_answered(request_limited):
    body = b'{"QueueNamePrefix":"none-such"}'
    with connect(request_limited.endpoint) as sock:
        sock.sendall(_head(f"Content-Length: {len(body)}\r\n", "Expect: 100-continue\r\n"))
        sock.settimeout(10)
        interim = sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), interim[:200]
        sock.sendall(body)
        response = interim[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
        while b"\r\n\r\n" not in response or not response.endswith(b"}"):
            response += sock.recv(65536)
    assert status_of(response) == 200, response[:300]
    assert json.loads(response.split(b"\r\n\r\n", 1)[1]) == {}  # no queue by that prefix: an empty document


@pytest.mark.parametrize("client", ["connects and sends nothing", "trickles its headers",
                                    "never ends a chunked body", "never sends its declared body",
                                    "stays idle after a response"])
def test_a_connection_that_does_not_finish_its_request_is_closed_at_the_deadline(request_limited, client):
    with connect(request_limited.endpoint) as sock:
        if client == "trickles its headers":
            for byte in b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ":
                sock.sendall(bytes([byte]))
                if answered(sock):
                    break
                threading.Event().wait(0.1)  # a byte every 100 ms: slower than any client, faster than the deadline
        elif client == "never ends a chunked body":
            sock.sendall(_head(extra="Transfer-Encoding: chunked\r\n") + b"5\r\nhello\r\n")
        elif client == "never sends its declared body":
            sock.sendall(_head("Content-Length: 100\r\n") + b"{")
        elif client == "stays idle after a response":
            body = b"{}"
            sock.sendall(_head(f"Content-Length: {len(body)}\r\n") + body)
        response = read_until_closed(sock, timeout=DEADLINE_S * 4 + 5)
    if client == "stays idle after a response":
        assert status_of(response) == 200
    else:
        assert response == b"", response[:300]
    _still_serves(request_limited)


def _trickle_until_closed(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Send a byte every 100 ms for up to SECONDS; (whether the server closed meanwhile, what it sent)."""
    received = b""
    for _ in range(int(seconds * 10)):
        while answered(sock):
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return True, received
            if not chunk:
                return True, received
            received += chunk
        try:
            sock.sendall(b"a")
        except (BrokenPipeError, ConnectionResetError):
            return True, received
        threading.Event().wait(0.1)  # slower than any client, faster than the deadline
    return False, received


@pytest.mark.parametrize("client", ["trickles its body", "pipelines a second request and trickles its head",
                                    "trickles a second request's head after a response"])
def test_a_connection_that_keeps_trickling_bytes_is_still_closed_at_the_deadline(request_limited, client):
    body = b"{}"
    whole = _head(f"Content-Length: {len(body)}\r\n") + body
    next_head = b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
    with connect(request_limited.endpoint) as sock:
        if client == "trickles its body":
            sock.sendall(_head("Content-Length: 100000\r\n") + b'{"a": "')
        elif client == "pipelines a second request and trickles its head":
            sock.sendall(whole + next_head)
        else:
            sock.sendall(whole)
            wait_for(lambda: answered(sock), "the first response")
            sock.sendall(next_head)
        closed, received = _trickle_until_closed(sock, DEADLINE_S * 4)
    assert closed, "the connection is still open after four deadlines of trickling"
    if client == "pipelines a second request and trickles its head":
        assert status_of(received) == 200  # the first request was answered before the second timed out
    _still_serves(request_limited)


def test_a_connection_flood_is_refused_beyond_the_limit_while_existing_connections_are_served(server_factory, tmp_path):
    limit = 40
    server = server_factory(tmp_path / "flood.db", "--max-connections", str(limit), "--header-timeout", "2")
    pid = server.pid
    baseline = open_descriptors(pid)
    existing = connect(server.endpoint)
    body = json.dumps({}).encode()
    request = _head(f"Content-Length: {len(body)}\r\n") + body
    existing.sendall(request)
    assert b" 200 " in existing.recv(65536)

    flood = [connect(server.endpoint) for _ in range(5 * limit)]
    try:
        wait_for(lambda: sum(answered(s) for s in flood) >= 4 * limit, "the refusals", 10)
        refused = [s for s in flood if answered(s)]
        replies = {read_until_closed(s, timeout=5)[:32] for s in refused}
        assert replies == {b"HTTP/1.1 503 Service Unavailable"}, replies
        assert open_descriptors(pid) <= baseline + limit + 2, (baseline, open_descriptors(pid))
        existing.sendall(request)  # a connection opened before the flood is still served
        assert b" 200 " in existing.recv(65536)
    finally:
        for sock in flood:
            sock.close()
        existing.close()
    wait_for(lambda: open_descriptors(pid) <= baseline + 1, "the flood's descriptors to be released", 10)
    _still_serves(server)


def _https_get(endpoint: str, path: str, ca: Path) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(endpoint + path, context=context, timeout=10) as response:
        assert response.status == 200
        return bytes(response.read())


def test_a_tls_port_counts_connections_from_their_accept_and_closes_those_that_never_shake_hands(
        server_factory, tmp_path):
    """TCP connections that never begin a TLS handshake: beyond the cap they are closed at once, counted and
    logged; the rest are closed at the handshake deadline, so HTTPS clients are served again."""
    ca, cert, key = make_test_ca(tmp_path)
    limit = 40
    server = server_factory(tmp_path / "tls.db", "--tls-cert", str(cert), "--tls-key", str(key),
                            "--max-connections", str(limit), "--handshake-timeout", "2", "--header-timeout", "3")
    pid = server.pid
    baseline = open_descriptors(pid)
    refused_before = Scrape(_https_get(server.endpoint, "/metrics", ca).decode()).value(
        "queueserver_connections_refused_total")

    flood = [connect(server.endpoint) for _ in range(5 * limit)]  # TCP only: no ClientHello, ever
    try:
        wait_for(lambda: sum(answered(s) for s in flood) >= 4 * limit, "the refusals", 10)
        assert open_descriptors(pid) <= baseline + limit + 2, (baseline, open_descriptors(pid))
        # the ones let in hold their slot no longer than the handshake deadline
        wait_for(lambda: all(answered(s) for s in flood), "the handshake deadline to close the rest", 15)
        assert all(read_until_closed(s, timeout=5) == b"" for s in flood)
    finally:
        for sock in flood:
            sock.close()
    wait_for(lambda: open_descriptors(pid) <= baseline + 1, "the flood's descriptors to be released", 10)
    scraped = Scrape(_https_get(server.endpoint, "/metrics", ca).decode())  # an HTTPS client is served again
    assert scraped.value("queueserver_connections_refused_total") - refused_before >= 4 * limit
    assert scraped.value("queueserver_connections_open") == 1  # this scrape's own
    assert "connection(s) refused" in server.stderr_text()

    context = ssl.create_default_context(cafile=str(ca))
    with context.wrap_socket(connect(server.endpoint), server_hostname="127.0.0.1") as shaken:
        # the handshake done, the head's deadline (3 s) counts from the accept
        assert read_until_closed(shaken, timeout=10) == b""


def test_the_metrics_listener_reads_its_bodies_through_the_same_door(server_factory, tmp_path):
    """The second listener (--metrics-listen) serves three GETs, but a body sent to it is still read by the
    door: refused as it streams or by its declared length, never held."""
    server = server_factory(tmp_path / "q.db", "--test-clock", "--metrics-listen", "127.0.0.1:0")
    endpoint = metrics_address(server)
    pid = server.pid
    before = memory_kib(pid)
    for path in ("/metrics", "/ready", "/anything"):
        with connect(endpoint) as sock:
            sock.sendall(_shaped_head("GET", path, "Transfer-Encoding: chunked\r\n"))
            sent = _stream_until_answered(sock, b"x" * MIB, 64 * MIB, chunked=True)
            response = read_until_closed(sock)
        assert status_of(response) == 413, (path, sent, response[:300])
        with connect(endpoint) as sock:
            sock.sendall(_shaped_head("GET", path, f"Content-Length: {1024 * MIB}\r\n"))
            assert status_of(read_until_closed(sock)) == 413
    assert memory_kib(pid)["VmHWM"] - before["VmHWM"] < 48 * 1024
    with urllib.request.urlopen(endpoint + "/metrics", timeout=30) as answer:
        assert answer.status == 200
