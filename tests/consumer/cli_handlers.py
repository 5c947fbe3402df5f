"""Handlers for the command-line tests, imported by a `queueserver worker` subprocess."""

from __future__ import annotations

import os
from typing import Any


def record(message: dict[str, Any]) -> None:
    """Append the body to the file named by $RECORD_FILE (one line per message)."""
    with open(os.environ["RECORD_FILE"], "a", encoding="utf-8") as out:
        out.write(message["Body"] + "\n")

