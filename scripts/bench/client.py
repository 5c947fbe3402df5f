"""The benchmarks' lean HTTP client: AWS JSON 1.0 requests over keep-alive asyncio connections.

Request bytes are built once per action and the response is parsed by hand, so that the client
costs little beside the server it measures (the load, auth and fifo subcommands).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any


class Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.fut: asyncio.Future | None = None
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.last_used = time.monotonic()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        self.buf = buf
        fut = self.fut
        if fut is None:
            return
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return
        i = buf.find(b"content-length:", 0, end)
        if i < 0:
            i = buf[:end].lower().find(b"content-length:")
            if i < 0:
                fut.set_exception(RuntimeError(f"response without content-length: {buf[:end]!r}"))
                self.fut = None
                return
        j = buf.find(b"\r\n", i, end + 2)
        total = end + 4 + int(buf[i + 15:j])
        if len(buf) < total:
            return
        self.buf = buf[total:]
        self.fut = None
        fut.set_result((int(buf[9:12]), buf[end + 4:total]))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        fut, self.fut = self.fut, None
        if fut is not None and not fut.done():
            fut.set_exception(ConnectionError(f"connection closed: {exc}"))

    def request(self, data: bytes) -> asyncio.Future:
        fut = self.loop.create_future()
        self.fut = fut
        self.last_used = time.monotonic()
        assert self.transport is not None
        self.transport.write(data)
        return fut

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(host: str, port: int) -> Conn:
    _, conn = await asyncio.get_running_loop().create_connection(Conn, host, port)
    return conn


async def fresh(conn: Conn, host: str, port: int) -> Conn:
    """The connection, or a new one if the server closed it or may be about to (uvicorn's
    keep-alive timeout is 5 s of idleness)."""
    if conn.closed or time.monotonic() - conn.last_used > 3.0:
        conn.close()
        return await connect(host, port)
    return conn


async def connect_many(host: str, port: int, n: int, chunk: int = 100) -> list[Conn]:
    conns: list[Conn] = []
    while len(conns) < n:
        conns += await asyncio.gather(*(connect(host, port) for _ in range(min(chunk, n - len(conns)))))
    return conns


class Api:
    """Request bytes for the SQS JSON protocol, prefixes built once per action."""

    def __init__(self, host: str, port: int) -> None:
        self._host = f"{host}:{port}".encode()
        self._prefix: dict[str, bytes] = {}

    def req(self, action: str, payload: dict[str, Any] | bytes) -> bytes:
        prefix = self._prefix.get(action)
        if prefix is None:
            prefix = (b"POST / HTTP/1.1\r\nHost: " + self._host +
                      b"\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS." +
                      action.encode() + b"\r\nContent-Length: ")
            self._prefix[action] = prefix
        body = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
        return b"%s%d\r\n\r\n%s" % (prefix, len(body), body)


class SQSError(RuntimeError):
    pass


async def call(conn: Conn, api: Api, action: str, payload: dict[str, Any]) -> dict[str, Any]:
    status, body = await conn.request(api.req(action, payload))
    if status != 200:
        raise SQSError(f"{action} -> {status}: {body[:300]!r}")
    return json.loads(body) if body else {}


class Client:
    """One keep-alive connection that reopens itself when the server closed it (or may be about to)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.api = Api(host, port)
        self.conn: Conn | None = None

    async def call(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        opened = connect(self.host, self.port) if self.conn is None else fresh(self.conn, self.host, self.port)
        self.conn = await opened
        return await call(self.conn, self.api, action, payload)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
