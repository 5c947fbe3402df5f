"""What the console's browser tests do on a page more than once."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect


def send_from_page(page: Any, body: str) -> None:
    """Send a test message with the queue page's form and wait for its notice."""
    form = page.locator("form.send")
    form.locator("textarea[name=body]").fill(body)
    form.get_by_role("button", name="Send").click()
    expect(page.locator(".notice")).to_contain_text("sent.")
