"""Whether a request's client is still connected, as a long poll needs to know, read off the ASGI
receive channel: once a request's body is read, the channel's next message is `http.disconnect`,
when the client hangs up (or the response is complete).

A long poll whose client has gone must not claim messages (nobody would get them: they would stay
in flight until their visibility timeout), so it asks before it claims and after.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

Receive = Callable[[], Awaitable[dict[str, Any]]]


class ClientConnection:
    __slots__ = ("_receive", "_gone")

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._gone = False

    def gone(self) -> bool:
        """Has the client hung up? Answered at once: the channel is asked one step, which either has a
        message ready (`http.disconnect` once the client has gone) or would have to wait (it is there)."""
        if self._gone:
            return True
        step = self._receive()
        try:
            step.send(None)  # type: ignore[attr-defined]
        except StopIteration as answered:
            self._gone = answered.value.get("type") == "http.disconnect"
            return self._gone
        step.close()  # type: ignore[attr-defined]
        return False

    async def hung_up(self) -> None:
        """Return when the client hangs up."""
        while (await self._receive()).get("type") != "http.disconnect":
            pass
        self._gone = True
