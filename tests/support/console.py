"""What the console's tests do more than once: a form sent from a page in chromium, and `Browser`, raw HTTP
with a cookie jar for the tests that need no page."""

from __future__ import annotations

import http.client
import re
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode, urlsplit

from playwright.sync_api import expect


def send_from_page(page: Any, body: str) -> None:
    """Send a test message with the queue page's form and wait for its notice."""
    form = page.locator("form.send")
    form.locator("textarea[name=body]").fill(body)
    form.get_by_role("button", name="Send").click()
    expect(page.locator(".notice")).to_contain_text("sent.")


class Browser:
    """Raw HTTP with a cookie jar: what a browser sends, and nothing the console's pages did not set."""

    def __init__(self, endpoint: str) -> None:
        self.address = urlsplit(endpoint)
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, fields: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection(self.address.hostname, self.address.port, timeout=15)
        headers = {"content-type": "application/x-www-form-urlencoded"}
        if self.cookies:
            headers["cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            conn.request(method, path, body=urlencode(fields or {}).encode(), headers=headers)
            response = conn.getresponse()
            for name, value in response.getheaders():
                if name.lower() == "set-cookie":
                    for morsel in SimpleCookie(value).values():
                        if morsel["max-age"] == "0" or not morsel.value.strip('"'):
                            self.cookies.pop(morsel.key, None)
                        else:
                            self.cookies[morsel.key] = morsel.value
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
        finally:
            conn.close()

    def token(self) -> str:
        status, _, body = self.request("GET", "/console/login")
        assert status == 200
        match = re.search(r'name="csrf_token" value="([^"]+)"', body)
        assert match is not None
        return match.group(1)

    def login(self, key_id: str, secret: str) -> tuple[int, str]:
        status, headers, _ = self.request("POST", "/console/login", {
            "csrf_token": self.token(), "access_key_id": key_id, "secret_access_key": secret})
        return status, headers.get("location", "")
