"""What the admin commands print: rich tables for people, one JSON document (or line) for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable


class Output:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self._console: Any = None

    @property
    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            # Piped output is read by grep and eyes at any width: never wrapped at 80 columns.
            console = Console(highlight=False)
            self._console = console if console.is_terminal else Console(highlight=False, width=400)
        return self._console

    def json(self, value: Any) -> None:
        sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def json_array(self, values: Iterable[Any]) -> None:
        """One JSON array, written item by item as they come: a listing of any length in constant memory."""
        sys.stdout.write("[")
        for i, value in enumerate(values):
            sys.stdout.write(("," if i else "") + json.dumps(value, ensure_ascii=False))
            sys.stdout.flush()
        sys.stdout.write("]\n")
        sys.stdout.flush()

    def result(self, value: Any, text: str) -> None:
        """A command's result: `value` as JSON, or `text` for people."""
        if self.as_json:
            self.json(value)
        else:
            self.console.print(text, markup=False)

    def table(self, value: Any, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        if self.as_json:
            self.json(value)
            return
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for column in columns:
            text = column in {"name", "url", "body", "attribute", "value", "message id", "state",
                              "dead-letter queue"}
            table.add_column(column, justify="left" if text else "right", overflow="fold")
        for row in rows:
            table.add_row(*("-" if cell is None else str(cell) for cell in row))
        self.console.print(table)


def counted(number: int, noun: str) -> str:
    """ "1 message", "2 messages", "0 messages": the nouns these commands count take an s."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def error(message: str) -> None:
    """A message for people, on stderr: stdout stays what a script reads."""
    sys.stderr.write(f"queueserver: {message}\n")

