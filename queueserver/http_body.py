"""The one door for request bytes: every request's body, on every route, is read here before its route runs.

A body is refused by its Content-Length before any of it is read, and one that declares none (chunked)
as soon as it grows past its route's limit, so no client can make the server hold more than that limit
whatever route it names and whatever that route would check next (a login, a CSRF token). The app's
route table (app.py) gives each route its limit; the SQS endpoint takes the bytes, the starlette apps a
receive channel that replays them.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from queueserver import errors

Receive = Callable[[], Awaitable[dict[str, Any]]]


def too_large(limit: int) -> errors.RequestTooLarge:
    return errors.RequestTooLarge(f"The request body must not be longer than {limit} bytes.")


def refuse_declared_oversize(headers: dict[str, str], limit: int) -> None:
    """RequestTooLarge for a Content-Length over LIMIT (or not a number), before any of the body is read."""
    declared = headers.get("content-length", "")
    if declared and (not declared.isdigit() or len(declared) > 18 or int(declared) > limit):
        raise too_large(limit)


async def read_rest(receive: Receive, limit: int, first: dict[str, Any]) -> bytes | None:
    """The whole body, from its first message on; RequestTooLarge as soon as it grows past LIMIT;
    None if the client disconnected. (The door takes a body that comes in one message itself.)"""
    chunks = []
    size = 0
    message: dict[str, Any] | None = first
    while True:
        if message is None:
            message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
        message = None


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive channel for an app behind the door: the body read, once, then the connection's own
    channel (which says when the client disconnects)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replayed
