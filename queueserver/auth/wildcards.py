"""IAM's `*` and `?` patterns, matched without backtracking.

A policy is written by whoever may set a queue's attributes, and it is evaluated on the event
loop, so matching must stay cheap whatever the pattern: a backtracking regex of `.*`s takes
time exponential in the number of stars. Here a pattern is cut at its stars into a head, a
tail and the pieces between; the head and tail are anchored, and each middle piece is placed
at the leftmost place it fits after the one before (placing it further right never helps the
rest). Each piece is tried at most once per position of the text: O(len(pattern) * len(text))
in the worst case, and one `str.find` per piece for pieces without `?`, the usual case.
"""

from __future__ import annotations


def _fits(piece: str, text: str, at: int) -> bool:
    """Whether `piece` (with `?` for any one character) matches `text` at index `at` (which leaves room)."""
    if "?" not in piece:
        return text.startswith(piece, at)
    for offset, char in enumerate(piece):
        if char != "?" and text[at + offset] != char:
            return False
    return True


def _find(piece: str, text: str, start: int, end: int) -> int:
    """The leftmost index from `start` where `piece` fits wholly before `end`, or -1."""
    if "?" not in piece:
        return text.find(piece, start, end)
    for at in range(start, end - len(piece) + 1):
        if _fits(piece, text, at):
            return at
    return -1


class Wildcard:
    """One pattern, cut once; `match` says whether a whole text matches it."""

    __slots__ = ("pattern", "_ignore_case", "_head", "_middle", "_tail", "_shortest", "_starred")

    def __init__(self, pattern: str, *, ignore_case: bool = False) -> None:
        self.pattern = pattern
        self._ignore_case = ignore_case
        if ignore_case:
            pattern = pattern.lower()
        pieces = pattern.split("*")
        self._starred = len(pieces) > 1
        self._head, self._tail = pieces[0], pieces[-1] if self._starred else ""
        self._middle = tuple(piece for piece in pieces[1:-1] if piece)
        self._shortest = len(pattern) - len(pieces) + 1  # every character but the stars stands for one

    def __repr__(self) -> str:
        return f"Wildcard({self.pattern!r})"

    def match(self, text: str) -> bool:
        if self._ignore_case:
            text = text.lower()
        head, tail = self._head, self._tail
        if not self._starred:
            return len(text) == len(head) and _fits(head, text, 0)
        if len(text) < self._shortest:
            return False
        end = len(text) - len(tail)
        if not (_fits(head, text, 0) and _fits(tail, text, end)):
            return False
        at = len(head)
        for piece in self._middle:
            found = _find(piece, text, at, end)
            if found < 0:
                return False
            at = found + len(piece)
        return True


def like(pattern: str, text: str) -> bool:
    """A one-off match (a Condition's `…Like` value), case-sensitive."""
    return Wildcard(pattern).match(text)
