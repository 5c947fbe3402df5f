"""What a client holds open cannot hold the server: an upgrade request, a reader that never reads its
answers, and one address opening every connection. Each against a real server process; the slots
are read back from /metrics and the memory from /proc."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.request
from typing import Any

import boto3
import pytest
from botocore.config import Config
from support.metrics import Scrape, metrics_address, scrape
from support.net import address, answered, connect, memory_kib, read_until_closed, status_of
from support.server import wait_for

pytestmark = pytest.mark.server_process


def _open_connections(endpoint: str, ca: Any = None) -> float:
    """Connections open now, the scrape's own included."""
    if ca is None:
        return scrape(endpoint).value("queueserver_connections_open")
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(endpoint + "/metrics", context=context, timeout=10) as answer:
        return Scrape(answer.read().decode()).value("queueserver_connections_open")


UPGRADE = (b"GET /anything HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


@pytest.mark.parametrize("listener", ["main", "metrics"])
def test_an_upgrade_request_is_refused_at_the_door_and_its_slot_comes_back(server_factory, tmp_path, listener):
    limit = 5
    server = server_factory(tmp_path / "upgrade.db", "--max-connections", str(limit), "--metrics-listen",
                            "127.0.0.1:0")
    target = server.endpoint if listener == "main" else metrics_address(server)
    for _ in range(3 * limit):
        with connect(target) as sock:
            sock.sendall(UPGRADE)
            response = read_until_closed(sock)
        assert status_of(response) == 400, response[:300]
        assert b"connection: close" in response.lower()
    # every upgrade's slot is back: the scrape's own connection is the only one open, on both listeners
    wait_for(lambda: _open_connections(server.endpoint) == 1, "the upgrades' slots to come back", 10)
    assert _open_connections(metrics_address(server)) == 1
    assert "Unsupported upgrade" not in server.stderr_text()


def test_an_upgrade_request_over_tls_is_refused_and_its_slot_comes_back(server_factory, tmp_path):
    from support.auth import make_test_ca

    ca, cert, key = make_test_ca(tmp_path)
    limit = 5
    server = server_factory(tmp_path / "upgrade-tls.db", "--tls-cert", str(cert), "--tls-key", str(key),
                            "--max-connections", str(limit))
    context = ssl.create_default_context(cafile=str(ca))
    for _ in range(3 * limit):
        with context.wrap_socket(connect(server.endpoint), server_hostname="127.0.0.1") as sock:
            sock.sendall(UPGRADE)
            response = read_until_closed(sock)
        assert status_of(response) == 400, response[:300]
    wait_for(lambda: _open_connections(server.endpoint, ca) == 1,
             "the upgrades' slots to come back", 10)


def _sqs(endpoint: str) -> Any:
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))


def _unread_receive(endpoint: str, queue_url: str) -> socket.socket:
    """A ReceiveMessage for ten messages whose answer is never read (a small receive buffer, so that
    the answer stays in the server's memory rather than the kernel's)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(address(endpoint))
    body = json.dumps({"QueueUrl": queue_url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 0}).encode()
    sock.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\n"
                 b"X-Amz-Target: AmazonSQS.ReceiveMessage\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return sock


def test_answers_nobody_reads_are_dropped_at_the_write_deadline_with_their_slots_and_memory(
        server_factory, tmp_path):
    """30 connections each ask for ten messages of ~1 MB and never read: each is closed at the write
    deadline, the connection count goes back to the scrape's own and the memory to within 32 MiB of
    where it was (30 unread answers would be 300 MB)."""
    server = server_factory(tmp_path / "unread.db", "--test-clock", "--write-timeout", "2")
    sqs = _sqs(server.endpoint)
    queue_url = sqs.create_queue(QueueName="big")["QueueUrl"]
    for _ in range(10):
        sqs.send_message(QueueUrl=queue_url, MessageBody="x" * 1_000_000)
    sqs.close()  # its pooled connection: the count below is the unread ones' and the scrape's
    baseline = memory_kib(server.pid)["VmRSS"]
    readers = [_unread_receive(server.endpoint, queue_url) for _ in range(30)]
    try:
        wait_for(lambda: scrape(server.endpoint).value("queueserver_connections_unread_closed_total") == 30,
                 "the write deadline to close the 30 unread connections", 30)
        wait_for(lambda: scrape(server.endpoint).value("queueserver_connections_open") == 1,
                 "only the scrape's own connection to be open", 10)
        # the answers' buffers are unmapped as their transports finish closing
        wait_for(lambda: memory_kib(server.pid)["VmRSS"] - baseline < 32 * 1024,
                 f"RSS to come back within 32 MiB of {baseline} KiB", 15)
    finally:
        for sock in readers:
            sock.close()
    assert _sqs(server.endpoint).list_queues()["QueueUrls"] == [queue_url]  # served on


def test_one_address_cannot_take_every_connection(server_factory, tmp_path):
    """With --max-connections 40 and no per-address setting, one address holds at most half (20); the
    rest of its connections are refused at once, and another address is still served."""
    server = server_factory(tmp_path / "fair.db", "--test-clock", "--max-connections", "40",
                            "--host", "127.0.0.1", "--metrics-listen", "127.0.0.2:0", "--header-timeout", "30")
    hog = [connect(server.endpoint) for _ in range(60)]
    try:
        wait_for(lambda: sum(answered(s) for s in hog) == 40, "the hog's surplus to be refused", 10)
        refused = [s for s in hog if answered(s)]
        assert {read_until_closed(s)[:32] for s in refused} == {b"HTTP/1.1 503 Service Unavailable"}
        # another address (the metrics listener's on 127.0.0.2, so the peer is 127.0.0.2 too) is served
        other = socket.create_connection(address(metrics_address(server)), source_address=("127.0.0.2", 0))
        with other:
            other.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            answer = b""
            while b"queueserver_connections_refused_per_address_total" not in answer:
                answer += other.recv(65536)
        assert status_of(answer) == 200
        text = answer.decode()
        assert "queueserver_connections_refused_per_address_total 40.0" in text
        assert "queueserver_connections_open 21.0" in text  # the hog's 20 and this one
    finally:
        for sock in hog:
            sock.close()


def test_an_answer_over_its_byte_budget_carries_fewer_whole_messages_and_the_rest_stay_for_the_next(
        server_factory, tmp_path):
    """MAX_ANSWER_BYTES is 8 MiB: of ten 1,000,000-character messages a receive returns eight, whole; the
    other two were never received (their receive count is 1 when the next receive gets them), and a
    browse page ends after eight with a NextToken to the rest."""
    from queueserver.limits import MAX_ANSWER_BYTES
    from support.wire import raw_json_call

    assert 8 * 1_000_000 <= MAX_ANSWER_BYTES < 9 * 1_000_000
    server = server_factory(tmp_path / "budget.db", "--test-clock")
    sqs = _sqs(server.endpoint)
    queue_url = sqs.create_queue(QueueName="big")["QueueUrl"]
    bodies = [str(n) * 1_000_000 for n in range(10)]
    for body in bodies:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    page = raw_json_call(server.endpoint, "QueueserverBrowseMessages",
                         {"QueueUrl": queue_url, "MaxNumberOfMessages": 10}).json()
    assert [m["Body"] for m in page["Messages"]] == bodies[:8] and "NextToken" in page
    rest = raw_json_call(server.endpoint, "QueueserverBrowseMessages",
                         {"QueueUrl": queue_url, "NextToken": page["NextToken"]}).json()
    assert [m["Body"] for m in rest["Messages"]] == bodies[8:]

    first = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]  # no attributes asked
    assert [m["Body"] for m in first] == bodies[:8]
    second = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in second] == bodies[8:]
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in second] == ["1", "1"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert (attributes["ApproximateNumberOfMessages"], attributes["ApproximateNumberOfMessagesNotVisible"]) == \
        ("0", "10")


def _via_proxy(endpoint: str, client: str, action: str, members: dict[str, Any]) -> socket.socket:
    """An SQS request as a proxy forwards it for CLIENT."""
    sock = connect(endpoint)
    body = json.dumps(members).encode()
    sock.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\n"
                 b"X-Amz-Target: AmazonSQS.%s\r\nX-Forwarded-For: %s\r\nContent-Length: %d\r\n\r\n%s"
                 % (action.encode(), client.encode(), len(body), body))
    return sock


def _status(sock: socket.socket) -> int:
    with sock:
        sock.settimeout(10)
        return status_of(sock.recv(65536))


def test_behind_a_trusted_proxy_each_forwarded_address_has_its_share(server_factory, tmp_path):
    """The proxy (loopback here) is not capped by its own address; its clients are, by the address it
    forwards: with --max-connections-per-address 5, five long polls in progress from 10.0.0.1 are its share
    (three more are refused, and so is a quick request), while 10.0.0.2 is served."""
    server = server_factory(tmp_path / "proxied.db", "--test-clock", "--trusted-proxy", "127.0.0.1",
                            "--max-connections-per-address", "5")
    sqs = _sqs(server.endpoint)
    queue_url = sqs.create_queue(QueueName="waited")["QueueUrl"]
    sqs.close()
    wait = {"QueueUrl": queue_url, "WaitTimeSeconds": 20}  # on the manual clock: until the test ends
    polls = [_via_proxy(server.endpoint, "10.0.0.1", "ReceiveMessage", wait) for _ in range(8)]
    try:
        wait_for(lambda: sum(answered(s) for s in polls) == 3, "three of the eight to be refused", 10)
        assert {status_of(s.recv(65536)) for s in polls if answered(s)} == {503}
        listing = {"QueueUrl": queue_url, "AttributeNames": ["All"]}
        assert _status(_via_proxy(server.endpoint, "10.0.0.1", "GetQueueAttributes", listing)) == 503
        assert _status(_via_proxy(server.endpoint, "10.0.0.2", "GetQueueAttributes", listing)) == 200
        assert scrape(server.endpoint).value("queueserver_connections_refused_per_address_total") == 4
    finally:
        for sock in polls:
            sock.close()
