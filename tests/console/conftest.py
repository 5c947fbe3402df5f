"""Fixtures for the console's tests: a server of their own and Debian's chromium driven by Playwright.

The browser is launched by path (`playwright install` downloads are not reachable here); when it is
missing the tests fail, never skip (.ci/run installs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clients import json_client
from support.server import running

from queueserver.testing.chromium import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running(tmp_path_factory.mktemp("console") / "queueserver.db") as proc:
        yield proc


@pytest.fixture(scope="module")
def console_sqs(console_server: Any) -> Any:
    return json_client(console_server.endpoint)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium), as .ci/run does")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()
