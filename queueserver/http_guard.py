"""One door for connections: uvicorn's httptools protocol with limits on what one connection may
hold, and the TLS listener's protocol below it.

uvicorn reads headers without a size or count limit, and closes a connection for idleness only
after a response: a connection that never finishes a request (a bare connect, a slow trickle of
header bytes, a chunked body that never ends) would hold its descriptor for ever. Here every
connection has a deadline for its request's head and another for its body, a cap on the head's
size and header count, and connections beyond `max_connections` are refused at once, so the
descriptors in use stay bounded whatever clients do.

Every connection passes the ConnectionGate at its accept. A plain one meets it in the HTTP
protocol's `connection_made` (its transport is the socket); a TLS one in the TLS protocol's
(`tls_protocol`), the first a TLS connection has, before its handshake, which must end within the
handshake deadline; its first head's deadline runs from the accept too. A connection that never
starts its handshake holds its descriptor no longer than one that never sends its headers.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from asyncio import sslproto
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from queueserver.config import ServerConfig
from queueserver.tallies import ConnectionTally

log = logging.getLogger(__name__)


def _plain(status: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


# Before a request is read its protocol is unknown, so these are plain HTTP (botocore retries a 503).
TOO_MANY_CONNECTIONS = _plain("503 Service Unavailable", "Too many connections; try again.")
HEAD_TOO_LARGE = _plain("431 Request Header Fields Too Large", "The request's headers are too large or too many.")
# uvicorn hands an upgraded connection's transport to another protocol, whose end the gate never sees: a
# request asking for any upgrade (WebSocket, h2c) is refused before it reaches the app.
UPGRADE_REFUSED = _plain("400 Bad Request", "This server does not upgrade connections.")


class RefusalLog:
    """One warning a minute for refused connections, with their count: a flood must not flood the log."""

    def __init__(self) -> None:
        self._refused = 0
        self._logged_at = float("-inf")

    def refused(self, loop: asyncio.AbstractEventLoop, limit: int) -> None:
        self._refused += 1
        if loop.time() - self._logged_at >= 60:
            log.warning("%d connection(s) refused: %d are open, the limit (--max-connections)",
                        self._refused, limit)
            self._refused = 0
            self._logged_at = loop.time()


class ConnectionGate:
    """The connections of every listener, counted from their accept: beyond `limit`, a new one is
    refused (counted, and logged at most once a minute)."""

    def __init__(self, limit: int, tally: ConnectionTally) -> None:
        self.limit = limit
        self.tally = tally
        self._refusals = RefusalLog()

    def admit(self, loop: asyncio.AbstractEventLoop) -> bool:
        if self.tally.open >= self.limit:
            self.tally.refused += 1
            self._refusals.refused(loop, self.limit)
            return False
        self.tally.open += 1
        return True

    def release(self) -> None:
        self.tally.open -= 1


class _RefusedHead(Exception):
    """Raised from a parser callback; httptools turns it into a parser error, which answers it."""


class GuardedHttpProtocol(HttpToolsProtocol):
    """The deadlines are set after each chunk is parsed, not from the parser's callbacks: a request
    that arrives whole (nearly all of them) then arms and cancels no timer at all, where arming
    one per callback cost two call_later and two cancels a request. What is still missing is read
    off uvicorn's own request cycle, and the head's size off its url and header list, so only
    `on_url` and `on_header` are overridden among the parser's callbacks (each override is a frame
    and a super call per request)."""

    def __init__(self, *args: Any, limits: ServerConfig, gate: ConnectionGate, under_tls: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._max_head_bytes = limits.max_header_bytes  # read per header: an attribute, not a lookup chain
        self._max_headers = limits.max_headers
        self._gate = gate
        self._under_tls = under_tls  # then the TLS protocol below passed the gate
        self._admitted = False
        self.accepted_at = self.loop.time()  # built at the accept, by the listener's protocol factory
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_is_body = False
        self._head_bytes = 0  # the current head's url and headers so far (reset at its first header)
        self._refusal: bytes | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self._under_tls:
            if not self._gate.admit(self.loop):
                self.transport = transport  # connection_lost closes it again
                transport.write(TOO_MANY_CONNECTIONS)
                transport.close()
                return
            self._admitted = True
        super().connection_made(transport)
        # The first head's deadline counts from the accept (under TLS, the handshake came first).
        self._arm(self._limits.header_timeout - (self.loop.time() - self.accepted_at), body=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._admitted:
            self._admitted = False
            self._gate.release()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # What is still missing after this chunk decides the deadline: the head (no request in
        # progress: from the next head's first bytes), the body (its head is in), or nothing.
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            if self._deadline is None:
                self._arm(self._limits.header_timeout, body=False)
        elif cycle.more_body:
            if not self._deadline_is_body:
                self._arm(self._limits.body_timeout, body=True)
        elif self._deadline is not None:
            self._disarm()

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > self._max_head_bytes:
            self._head_too_large()
        self.url += url  # uvicorn's on_url, inline

    def on_header(self, name: bytes, value: bytes) -> None:
        # This runs for every header of every request: no helper, and uvicorn's own on_header
        # (lower-case the name, note `Expect: 100-continue`, append) inline rather than a second frame.
        headers = self.headers  # uvicorn's list for this request, new at each message's start
        if not headers:
            self._head_bytes = len(self.url)
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > self._max_head_bytes or len(headers) >= self._max_headers:
            self._head_too_large()
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        elif name == b"upgrade":
            self._refuse(UPGRADE_REFUSED)
        headers.append((name, value))

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
            return
        self.transport.write(self._refusal)
        self.transport.close()

    def _head_too_large(self) -> None:
        log.info("request refused: its head is over %d bytes or %d headers (431)",
                 self._limits.max_header_bytes, self._limits.max_headers)
        self._refuse(HEAD_TOO_LARGE)

    def _refuse(self, answer: bytes) -> None:
        """Stop parsing: uvicorn's parser-error path then calls send_400_response, which sends ANSWER."""
        self._refusal = answer
        raise _RefusedHead()

    def _arm(self, seconds: float, body: bool) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expire)
        self._deadline_is_body = body

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
            self._deadline_is_body = False

    def _expire(self) -> None:
        what = "body" if self._deadline_is_body else "head"
        self._deadline = None
        self._deadline_is_body = False
        log.debug("connection closed: the request's %s did not arrive in time", what)  # a flood must not flood the log
        self.transport.close()


class _TlsGate:
    """Mixed into the loop's TLS protocol: the connection meets the gate at its accept, before the
    handshake. A refused one is closed at once (there is no TLS yet to answer 503 in)."""

    _gate: ConnectionGate
    _admitted: bool = False

    def connection_made(self, transport: asyncio.Transport) -> None:
        if not self._gate.admit(asyncio.get_running_loop()):
            transport.abort()
            return
        self._admitted = True
        super().connection_made(transport)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:  # refused: nothing of TLS or HTTP began
            return
        self._admitted = False
        self._gate.release()
        super().connection_lost(exc)  # type: ignore[misc]


@functools.cache
def _tls_class(on_uvloop: bool) -> type:
    """The gate over the loop's own TLS protocol (uvloop has its own, faster one)."""
    base: type = sslproto.SSLProtocol
    if on_uvloop:
        import uvloop.loop  # noqa: PLC0415 - only where uvloop runs the server

        base = uvloop.loop.SSLProtocol  # type: ignore[attr-defined]
    return type("GuardedTlsProtocol", (_TlsGate, base), {})


def tls_protocol(http: GuardedHttpProtocol, context: ssl.SSLContext, gate: ConnectionGate,
                 handshake_timeout: float) -> asyncio.BaseProtocol:
    """The protocol a TLS connection starts with: the gate, then the handshake (closed if it takes
    longer than `handshake_timeout`), then `http`."""
    loop = asyncio.get_running_loop()
    protocol = _tls_class(type(loop).__module__.startswith("uvloop"))(
        loop, http, context, None, server_side=True, ssl_handshake_timeout=handshake_timeout)
    protocol._gate = gate
    return protocol
