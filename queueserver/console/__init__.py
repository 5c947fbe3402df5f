"""The web console under /console: server-rendered pages (Jinja2) over the same engine as the SQS endpoint.

Every change goes through the protocol's action handlers (`calls.py`), so the console validates and
answers errors exactly as SQS does; everything it shows comes from memory or the read side.
"""

from queueserver.console.routes import CONSOLE_PREFIX, create_console

__all__ = ["CONSOLE_PREFIX", "create_console"]
