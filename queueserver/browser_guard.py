"""Browser safety while requests carry no checked credentials.

Any web page can make a browser send requests to a server on the visitor's machine. A
cross-origin request that changes state always shows itself: a POST (a form, fetch) carries
an `Origin`, and every request of a current browser, a GET from an `<img>` included, carries
`Sec-Fetch-Site: cross-site` or `same-site`. Such requests are refused unless their origin
is allowed by a setting (which then gets CORS answers, for the JavaScript SDK in a browser).
GET keeps every action, as AWS's Query protocol does (its GETs are signed, ours are not);
a DNS-rebinding page is same-origin by its own account, so only the Host allow-list stops it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

_FOREIGN_SITES = frozenset({"cross-site", "same-site"})
_EXPOSED = "x-amzn-requestid, x-amzn-query-error, date"
_PREFLIGHT_MAX_AGE = "600"


def host_name(host: str) -> str:
    """The name in a Host header, without the port: `[::1]:9324` → `::1`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


class BrowserGuard:
    def __init__(self, origins: Iterable[str], hosts: Iterable[str]) -> None:
        self._origins = frozenset(origin.rstrip("/").lower() for origin in origins)
        self._hosts = frozenset(host_name(host) for host in hosts)

    def allows_origin(self, origin: str) -> bool:
        return "*" in self._origins or origin.rstrip("/").lower() in self._origins

    def refusal(self, headers: Mapping[str, str]) -> str | None:
        """Why the request is refused, or None. `headers` has lower-case names."""
        if self._hosts and host_name(headers.get("host", "")) not in self._hosts:
            return f"The host name {headers.get('host', '')!r} is not served here (see --allow-host)."
        origin = headers.get("origin")
        if origin is not None:
            if self.allows_origin(origin):
                return None
            return f"Requests from the web origin {origin!r} are refused (see --allow-origin)."
        if headers.get("sec-fetch-site", "").lower() in _FOREIGN_SITES:
            return "A browser request from another site is refused (see --allow-origin)."
        return None

    def cors_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """What a response to an allowed origin adds so its page may read it."""
        origin = headers.get("origin")
        if origin is None or not self.allows_origin(origin):
            return {}
        return {"access-control-allow-origin": origin, "access-control-expose-headers": _EXPOSED, "vary": "Origin"}

    def preflight_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """The answer to an allowed origin's CORS preflight (OPTIONS with Access-Control-Request-Method)."""
        requested = headers.get("access-control-request-headers", "")
        return {**self.cors_headers(headers), "access-control-allow-methods": "GET, POST",
                **({"access-control-allow-headers": requested} if requested else {}),
                "access-control-max-age": _PREFLIGHT_MAX_AGE}
