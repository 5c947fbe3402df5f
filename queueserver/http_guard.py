"""uvicorn's httptools protocol with limits on what one connection may hold.

uvicorn reads headers without a size or count limit, and closes a connection for idleness only
after a response: a connection that never finishes a request (a bare connect, a slow trickle of
header bytes, a chunked body that never ends) would hold its descriptor for ever. Here every
connection has a deadline for its request's head and another for its body, a cap on the head's
size and header count, and connections beyond `max_connections` are answered 503 and closed at
once, so the descriptors in use stay bounded whatever clients do.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from queueserver.config import ServerConfig

log = logging.getLogger(__name__)


def _plain(status: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


# Before a request is read its protocol is unknown, so these are plain HTTP (botocore retries a 503).
TOO_MANY_CONNECTIONS = _plain("503 Service Unavailable", "Too many connections; try again.")
HEAD_TOO_LARGE = _plain("431 Request Header Fields Too Large", "The request's headers are too large or too many.")


class RefusalLog:
    """One warning a minute for refused connections, with their count: a flood must not flood the log."""

    def __init__(self) -> None:
        self._refused = 0
        self._logged_at = float("-inf")

    def refused(self, loop: asyncio.AbstractEventLoop, limit: int) -> None:
        self._refused += 1
        if loop.time() - self._logged_at >= 60:
            log.warning("%d connection(s) refused with 503: %d are open, the limit (--max-connections)",
                        self._refused, limit)
            self._refused = 0
            self._logged_at = loop.time()


class _HeadTooLarge(Exception):
    """Raised from a parser callback; httptools turns it into a parser error, which answers it."""


class GuardedHttpProtocol(HttpToolsProtocol):
    """The deadlines are set after each chunk is parsed, not from the parser's callbacks: a request
    that arrives whole (nearly all of them) then arms and cancels no timer at all, where arming
    one per callback cost two call_later and two cancels a request. What is still missing is read
    off uvicorn's own request cycle, and the head's size off its url and header list, so only
    `on_url` and `on_header` are overridden among the parser's callbacks (each override is a frame
    and a super call per request)."""

    def __init__(self, *args: Any, limits: ServerConfig, refusals: RefusalLog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._max_head_bytes = limits.max_header_bytes  # read per header: an attribute, not a lookup chain
        self._max_headers = limits.max_headers
        self._refusals = refusals
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_is_body = False
        self._head_bytes = 0  # the current head's url and headers so far (reset at its first header)
        self._refusal: bytes | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self._limits.max_connections:
            self.transport = transport  # connection_lost closes it again
            transport.write(TOO_MANY_CONNECTIONS)
            transport.close()
            self._refusals.refused(self.loop, self._limits.max_connections)
            return
        super().connection_made(transport)
        self._arm(self._limits.header_timeout, body=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
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
        headers.append((name, value))

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
            return
        self.transport.write(self._refusal)
        self.transport.close()

    def _head_too_large(self) -> None:
        self._refusal = HEAD_TOO_LARGE
        log.info("request refused: its head is over %d bytes or %d headers (431)",
                 self._limits.max_header_bytes, self._limits.max_headers)
        raise _HeadTooLarge()

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
