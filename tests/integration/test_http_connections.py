"""HTTP/1.1 on one connection: keep-alive, pipelined requests, Connection: close.

The server joins each response's head and body into one write; these check that
responses still come whole, in order, and that a closing connection gets its answer.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlparse


def _request(host: str, action: str, payload: dict, extra_headers: str = "") -> bytes:
    body = json.dumps(payload).encode()
    head = (f"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-amz-json-1.0\r\n"
            f"X-Amz-Target: AmazonSQS.{action}\r\nContent-Length: {len(body)}\r\n{extra_headers}\r\n")
    return head.encode() + body


class _Responses:
    """Reads HTTP/1.1 responses with a Content-Length off a socket, one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def _fill(self) -> bool:
        chunk = self._sock.recv(65536)
        self._buffer += chunk
        return bool(chunk)

    def next(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self._buffer:
            assert self._fill(), f"the connection closed before a response head: {self._buffer!r}"
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
        length = int(headers["content-length"])
        while len(self._buffer) < length:
            assert self._fill(), "the connection closed inside a response body"
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return int(status_line.split()[1]), headers, body

    def closed(self) -> bool:
        return not self._buffer and not self._fill()


def _connect(endpoint: str) -> tuple[socket.socket, str]:
    url = urlparse(endpoint)
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    return sock, url.netloc


def test_pipelined_requests_get_whole_responses_in_order(server):
    sock, host = _connect(server.endpoint)
    with sock:
        sock.sendall(_request(host, "GetQueueUrl", {"QueueName": "no-such-queue-pipelined"})
                     + _request(host, "CreateQueue", {"QueueName": "pipelined"})
                     + _request(host, "GetQueueUrl", {"QueueName": "pipelined"}))
        responses = _Responses(sock)
        status, headers, body = responses.next()
        assert status == 400
        assert json.loads(body)["__type"] == "com.amazonaws.sqs#QueueDoesNotExist"
        assert headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
        created = responses.next()
        assert created[0] == 200
        fetched = responses.next()
        assert fetched[0] == 200
        assert json.loads(fetched[2])["QueueUrl"] == json.loads(created[2])["QueueUrl"]
        assert created[1]["x-amzn-requestid"] != fetched[1]["x-amzn-requestid"]


def test_keep_alive_serves_many_requests_on_one_connection(server):
    sock, host = _connect(server.endpoint)
    with sock:
        responses = _Responses(sock)
        for _ in range(50):
            sock.sendall(_request(host, "ListQueues", {}))
            status, headers, body = responses.next()
            assert status == 200
            assert headers["content-type"] == "application/x-amz-json-1.0"
            assert isinstance(json.loads(body), dict)


def test_connection_close_gets_its_response_and_then_the_close(server):
    sock, host = _connect(server.endpoint)
    with sock:
        sock.sendall(_request(host, "ListQueues", {}, "Connection: close\r\n"))
        responses = _Responses(sock)
        status, headers, _ = responses.next()
        assert status == 200
        assert headers.get("connection") == "close"
        assert responses.closed()
