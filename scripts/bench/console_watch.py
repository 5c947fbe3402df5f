"""Keep one console page open in headless chromium until killed (the bench's --console-page load).

The page refreshes itself (its script re-fetches the overview every 5 s), as a user's open tab does.
Run: .venv/bin/python scripts/bench/console_watch.py http://127.0.0.1:PORT [/console]
"""

from __future__ import annotations

import signal
import sys
import threading

from playwright.sync_api import sync_playwright

from queueserver.testing.chromium import CHROMIUM, CHROMIUM_ARGS


def main() -> int:
    endpoint = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else "/console"
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(endpoint + path)
        print("WATCHING", flush=True)
        while not stop.is_set():
            page.wait_for_timeout(500)  # lets the page's refresh timers run
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
