"""Who is looking at the console, what they may do, and whether a request really comes from its own pages.

`Access.viewer(request)` is the one seam for credentials (the auth issue): today no credentials are
configured, so every viewer is `Viewer.anyone()` and may do everything. With credentials, `viewer`
reads a signed session cookie set by a login form (access key and secret checked against the credential
store) and `Viewer.may` asks the policy evaluator; pages then show and allow only what it permits.

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

from queueserver.browser_guard import BrowserGuard

CSRF_COOKIE = "qs_console_csrf"
CSRF_FIELD = "csrf_token"
_FOREIGN_SITES = frozenset({"cross-site", "same-site"})


@dataclass(frozen=True)
class Viewer:
    """A console user; `may(action, queue_arn)` answers with the SQS action names policies use."""

    name: str
    allows: Callable[[str, str], bool]

    @classmethod
    def anyone(cls) -> "Viewer":
        return cls("anyone (no credentials configured)", lambda action, arn: True)

    def may(self, action: str, queue_arn: str = "*") -> bool:
        return self.allows(action, queue_arn)


class Access:
    def __init__(self, guard: BrowserGuard) -> None:
        self._guard = guard

    def viewer(self, request: Request) -> Viewer:
        """The one place that decides who is viewing (allow-all while no credentials are configured)."""
        return Viewer.anyone()

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
