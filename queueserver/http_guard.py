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
import ipaddress
import logging
import ssl
from asyncio import sslproto
from typing import Any, Iterable

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
# The bytes a connection's transport buffers before its writer waits (asyncio's default): what an
# unread connection holds beyond the one answer being written.
WRITE_HIGH_WATER = 64 * 1024
# uvicorn hands an upgraded connection's transport to another protocol, whose end the gate never sees: a
# request asking for any upgrade (WebSocket, h2c) is refused before it reaches the app.
UPGRADE_REFUSED = _plain("400 Bad Request", "This server does not upgrade connections.")


class RefusalLog:
    """One warning a minute for refused connections, with their count: a flood must not flood the log."""

    def __init__(self) -> None:
        self._refused = 0
        self._logged_at = float("-inf")

    def refused(self, loop: asyncio.AbstractEventLoop, why: str) -> None:
        self._refused += 1
        if loop.time() - self._logged_at >= 60:
            log.warning("%d connection(s) refused: %s", self._refused, why)
            self._refused = 0
            self._logged_at = loop.time()


class ConnectionGate:
    """The connections of every listener, counted from their accept: beyond `limit` in all, or
    `per_address` from one peer address, a new one is refused (counted, and logged at most once a
    minute). A trusted proxy's own address is not capped: its clients are behind it."""

    def __init__(self, limit: int, tally: ConnectionTally, per_address: int | None = None,
                 trusted_proxies: Iterable[str] = ()) -> None:
        self.limit = limit
        self.per_address = per_address if per_address is not None else limit
        self.tally = tally
        self._by_address: dict[str, int] = {}  # only addresses with a connection open: at most `limit` keys
        self._uncapped = tuple(ipaddress.ip_network(proxy, strict=False) for proxy in trusted_proxies)
        self._refusals = RefusalLog()

    def admit(self, loop: asyncio.AbstractEventLoop, address: str | None) -> bool:
        """Count a new connection from ADDRESS in (True) or refuse it (False); a True is paired
        with one `release(address)`."""
        tally = self.tally
        if tally.open >= self.limit:
            tally.refused += 1
            self._refusals.refused(loop, f"{tally.open} are open, the limit (--max-connections)")
            return False
        if address is not None:
            held = self._by_address.get(address, 0)
            if held >= self.per_address and not self._is_trusted_proxy(address):
                tally.refused += 1
                tally.refused_per_address += 1
                self._refusals.refused(loop, f"{held} are open from {address}, the limit "
                                             "(--max-connections-per-address)")
                return False
            self._by_address[address] = held + 1
        tally.open += 1
        return True

    def release(self, address: str | None) -> None:
        self.tally.open -= 1
        if address is not None:
            held = self._by_address.pop(address) - 1
            if held:
                self._by_address[address] = held

    def _is_trusted_proxy(self, address: str) -> bool:
        if not self._uncapped:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self._uncapped)


class ForwardedShare:
    """The per-address share behind a trusted proxy: one proxy connection carries many clients' requests,
    so there the requests in progress of each client address (the forwarded one, which uvicorn's proxy
    headers put in the scope before this runs) are counted against --max-connections-per-address, and a
    request beyond is answered 503. A client that connects directly never reaches it: it has no more
    requests in progress than connections. Used only with --trusted-proxy (off the hot path otherwise)."""

    def __init__(self, app: Any, gate: ConnectionGate) -> None:
        self._app = app
        self._gate = gate
        self._in_progress: dict[str, int] = {}  # only addresses with a request in progress

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        client = scope.get("client")
        if scope["type"] != "http" or not client:
            await self._app(scope, receive, send)
            return
        address = client[0]
        held = self._in_progress.get(address, 0)
        if held >= self._gate.per_address:
            self._gate.tally.refused_per_address += 1
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": b"Too many requests from your address; try again."})
            return
        self._in_progress[address] = held + 1
        try:
            await self._app(scope, receive, send)
        finally:
            left = self._in_progress.pop(address) - 1
            if left:
                self._in_progress[address] = left


def peer_address(transport: asyncio.BaseTransport) -> str | None:
    """The connection's peer IP address (None for a Unix socket)."""
    peer = transport.get_extra_info("peername")
    return peer[0] if isinstance(peer, tuple) and peer else None


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
        self._address: str | None = None
        self.accepted_at = self.loop.time()  # built at the accept, by the listener's protocol factory
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_is_body = False
        self._write_deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0  # the current head's url and headers so far (reset at its first header)
        self._refusal: bytes | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self._under_tls:
            self._address = peer_address(transport)
            if not self._gate.admit(self.loop, self._address):
                self.transport = transport  # connection_lost closes it again
                transport.write(TOO_MANY_CONNECTIONS)
                transport.close()
                return
            self._admitted = True
        super().connection_made(transport)
        # Writing pauses above the high-water mark and resumes only once everything is sent: the
        # write deadline then runs from the first moment an answer is not taken to its last byte.
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=0)
        # The first head's deadline counts from the accept (under TLS, the handshake came first).
        self._arm(self._limits.header_timeout - (self.loop.time() - self.accepted_at), body=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_write()
        if self._admitted:
            self._admitted = False
            self._gate.release(self._address)
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

    # The write deadline: an answer the client does not read (the transport's buffer above its
    # high-water mark, or anything left unsent once the connection is closing) ends the connection
    # after `write_deadline`, aborted so that its buffer is freed at once. Nothing here runs for an
    # answer that the socket takes whole, which is nearly all of them.
    def pause_writing(self) -> None:
        super().pause_writing()
        self._arm_write()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._disarm_write()

    def closed_unsent(self) -> None:
        """Called by the transport when it is closed with bytes unsent: close() waits for the client to
        read them, and that wait has the write deadline too."""
        self._arm_write()

    def _arm_write(self) -> None:
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self._limits.write_deadline, self._write_expired)

    def _disarm_write(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _write_expired(self) -> None:
        self._write_deadline = None
        self._gate.tally.unread_closed += 1
        log.debug("connection closed: its client did not read the answer in time (--write-timeout)")
        self.transport.abort()


class _TlsGate:
    """Mixed into the loop's TLS protocol: the connection meets the gate at its accept, before the
    handshake. A refused one is closed at once (there is no TLS yet to answer 503 in)."""

    _gate: ConnectionGate
    _admitted: bool = False
    _address: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        self._address = peer_address(transport)
        if not self._gate.admit(asyncio.get_running_loop(), self._address):
            transport.abort()
            return
        self._admitted = True
        super().connection_made(transport)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:  # refused: nothing of TLS or HTTP began
            return
        self._admitted = False
        self._gate.release(self._address)
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
