"""A sorted set of keys kept in chunks, so that a listing starts anywhere in O(log n).

ListQueues, the console's overview and its pages read a window of the queues in name order. A
plain sorted list costs a memmove of the whole list per insert (~40 µs at 100,000 queues, and
growing with them); chunks of at most 2 × CHUNK keys keep an insert or a removal at O(CHUNK + log n)
whatever the number of queues. Iterators walk the chunks as they are: consume them without
awaiting in between (on the event loop nothing else changes them meanwhile).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Generic, Iterable, Iterator, TypeVar

K = TypeVar("K")  # a tuple of strings: compared as Python compares tuples
CHUNK = 512


class SortedKeys(Generic[K]):
    def __init__(self, keys: Iterable[K] = ()) -> None:
        ordered = sorted(set(keys))
        self._chunks: list[list[K]] = [ordered[i:i + CHUNK] for i in range(0, len(ordered), CHUNK)]
        self._firsts: list[K] = [chunk[0] for chunk in self._chunks]
        self._size = len(ordered)

    def __len__(self) -> int:
        return self._size

    def add(self, key: K) -> None:
        if not self._chunks:
            self._chunks, self._firsts, self._size = [[key]], [key], 1
            return
        i = max(bisect_right(self._firsts, key) - 1, 0)
        chunk = self._chunks[i]
        j = bisect_left(chunk, key)
        if j < len(chunk) and chunk[j] == key:
            return
        chunk.insert(j, key)
        self._firsts[i] = chunk[0]
        self._size += 1
        if len(chunk) > 2 * CHUNK:
            self._chunks[i:i + 1] = [chunk[:CHUNK], chunk[CHUNK:]]
            self._firsts[i:i + 1] = [chunk[0], chunk[CHUNK]]

    def discard(self, key: K) -> None:
        i = bisect_right(self._firsts, key) - 1
        if i < 0:
            return
        chunk = self._chunks[i]
        j = bisect_left(chunk, key)
        if j == len(chunk) or chunk[j] != key:
            return
        del chunk[j]
        self._size -= 1
        if chunk:
            self._firsts[i] = chunk[0]
        else:
            del self._chunks[i], self._firsts[i]

    def from_key(self, key: K, *, inclusive: bool = True) -> Iterator[K]:
        """The keys at or after `key` (after it only, if not `inclusive`), in ascending order."""
        find = bisect_left if inclusive else bisect_right
        first = max(bisect_right(self._firsts, key) - 1, 0)
        for i in range(first, len(self._chunks)):
            chunk = self._chunks[i]
            yield from chunk[find(chunk, key):] if i == first else chunk

    def before_key(self, key: K) -> Iterator[K]:
        """The keys before `key`, in descending order."""
        last = bisect_right(self._firsts, key) - 1
        for i in range(last, -1, -1):
            chunk = self._chunks[i]
            yield from reversed(chunk[:bisect_left(chunk, key)] if i == last else chunk)
