"""Who is looking at the console, what they may do, and whether a request really comes from its own pages.

`Access.viewer(request)` is the one place deciding who views. Without credentials every viewer is
`Viewer.anyone()` and may do everything. With credentials, `viewer` reads the session cookie set by
the login form (sessions.py) and answers None when there is none; a logged-in viewer's `may` is the
SQS endpoint's own rule of that action (`door.permits`, with the Policy that governs the queue),
and its actions run as that caller, through the same door (protocol/door.py) as every SQS request. `visible_queue` is the one answer to "may this viewer see that
queue": a queue it may not see and a queue that does not exist are the same None, reached by the
same work, so no page tells them apart.

Cross-site request forgery: a state change must be a POST whose form carries the CSRF token set in a
cookie (double submit; a foreign page can read neither) and, when the browser says where it comes
from (Origin, Sec-Fetch-Site), come from the console's own origin. --allow-origin opens the SQS
endpoint to a page's JavaScript; it never opens the console's forms.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

from starlette.requests import Request

from queueserver import errors
from queueserver.auth import Authenticator, Principal
from queueserver.browser_guard import BrowserGuard
from queueserver.console.sessions import SESSION_COOKIE, Sessions
from queueserver.models import Queue
from queueserver.protocol.door import permits
from queueserver.storage import QueueEngine

CSRF_COOKIE = "qs_console_csrf"
CSRF_FIELD = "csrf_token"
_FOREIGN_SITES = frozenset({"cross-site", "same-site"})


@dataclass(frozen=True)
class Viewer:
    """A console user; `may(action, queue_arn)` answers with the SQS action names policies use."""

    name: str
    allows: Callable[[str, str], bool]
    account: str
    caller: Principal | None = None  # None: credentials are off, the console acts as the server's own account

    @classmethod
    def anyone(cls, account: str) -> "Viewer":
        return cls("anyone (no credentials configured)", lambda action, arn: True, account)

    def may(self, action: str, queue_arn: str = "*") -> bool:
        return self.allows(action, queue_arn)


class Access:
    def __init__(self, guard: BrowserGuard, engine: QueueEngine, account: str, region: str,
                 authenticator: Authenticator | None) -> None:
        self._guard = guard
        self._engine = engine
        self._account = account
        self._region = region
        self._authenticator = authenticator
        self.sessions = Sessions(authenticator.store, engine.clock) if authenticator is not None else None

    def viewer(self, request: Request) -> Viewer | None:
        """Who is viewing: anyone without credentials; with them the session's key, or None (log in first)."""
        if self._authenticator is None or self.sessions is None:
            return Viewer.anyone(self._account)
        key = self.sessions.key(request.cookies.get(SESSION_COOKIE, ""))
        if key is None:
            return None
        client = request.client.host if request.client else ""
        caller = self._authenticator.caller_for(key, self._region, self._engine.clock.now_ms(), client,
                                                request.url.scheme == "https")

        def allows(action: str, arn: str) -> bool:
            return permits(self._engine, caller, action, arn)

        return Viewer(key.arn, allows, key.account, caller)

    def policy_unreadable(self, queue: Queue) -> bool:
        """Whether the queue's stored Policy is one this server cannot evaluate (its page says so)."""
        text = queue.attributes.get("Policy")
        if not text or self._authenticator is None:
            return False
        return not self._authenticator.policy_is_readable(text)

    @staticmethod
    def admitted(viewer: Viewer, way: str) -> bool:
        """Whether the viewer passes the door's rule of a console page's server-wide part (auth/door.py)."""
        if viewer.caller is None:  # credentials off: the console is the operator's
            return True
        try:
            viewer.caller.admit_server(way)
        except errors.AccessDenied:
            return False
        return True

    def visible_queue(self, viewer: Viewer, region: str, account: str, name: str) -> Queue | None:
        """The queue (or subscription) if it exists and the viewer may see it (GetQueueAttributes), else None."""
        arn = f"arn:aws:sqs:{region}:{account}:{name}"
        queue = self._engine.find_queue_by_arn(arn)
        allowed = viewer.may("GetQueueAttributes", arn)  # asked of a missing queue too: the same work
        return queue if allowed else None

    def refusal(self, request: Request) -> str | None:
        """Why the request must not be served, or None."""
        headers = {name.lower(): value for name, value in request.headers.items()}
        host_check = self._guard.refusal({"host": headers.get("host", "")})  # DNS rebinding: the Host allow-list
        if host_check is not None:
            return host_check
        site = headers.get("sec-fetch-site", "").lower()
        if request.method == "GET":
            # A link from elsewhere may open a page (a navigation changes nothing); nothing else may load it.
            if site in _FOREIGN_SITES and headers.get("sec-fetch-mode", "") != "navigate":
                return "A request from another site is refused."
            return None
        origin = headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() != f"{request.url.scheme}://{headers.get('host', '')}".lower():
            return f"A form posted from the web origin {origin!r} is refused."
        if site in _FOREIGN_SITES:
            return "A form posted from another site is refused."
        return None

    @staticmethod
    def csrf_token(request: Request) -> tuple[str, bool]:
        """The token for this browser's forms, and whether it is new (then set as a cookie)."""
        token = request.cookies.get(CSRF_COOKIE, "")
        if len(token) == 43 and token.replace("-", "").replace("_", "").isalnum():
            return token, False
        return secrets.token_urlsafe(32), True

    @staticmethod
    def csrf_ok(request: Request, submitted: str) -> bool:
        cookie = request.cookies.get(CSRF_COOKIE, "")
        return bool(cookie) and hmac.compare_digest(cookie.encode(), submitted.encode())
