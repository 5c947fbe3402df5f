"""Debian's chromium, headless, for driving the console in a browser: the console's tests and its screenshots.

Never a browser download (`playwright install`): the system's chromium, by path
(`QUEUESERVER_CHROMIUM` names another).
"""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("QUEUESERVER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
