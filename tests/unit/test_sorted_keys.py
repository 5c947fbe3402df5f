"""The chunked sorted set behind ListQueues and the console's pages, against a plain sorted list."""

from __future__ import annotations

import random

from queueserver.storage import sorted_keys
from queueserver.storage.sorted_keys import SortedKeys


def test_adds_and_removals_in_any_order_keep_every_window_as_a_sorted_list_has_it(monkeypatch) -> None:
    monkeypatch.setattr(sorted_keys, "CHUNK", 4)  # chunks split and empty many times over
    rng = random.Random(7)
    names = [(f"n{rng.randrange(300):03d}", "r") for _ in range(600)]
    keys: SortedKeys[tuple[str, str]] = SortedKeys(names[:50])
    plain = sorted(set(names[:50]))
    for step, key in enumerate(names[50:]):
        if step % 3 == 2 and plain:
            gone = rng.choice(plain)
            keys.discard(gone)
            plain.remove(gone)
            keys.discard(gone)  # a second removal changes nothing
        else:
            keys.add(key)
            if key not in plain:
                plain = sorted(plain + [key])
        assert len(keys) == len(plain)
        probe = (f"n{rng.randrange(310):03d}", rng.choice(["", "r", "s"]))
        assert list(keys.from_key(probe)) == [k for k in plain if k >= probe]
        assert list(keys.from_key(probe, inclusive=False)) == [k for k in plain if k > probe]
        assert list(keys.before_key(probe)) == [k for k in reversed(plain) if k < probe]


def test_an_empty_set_lists_nothing_and_takes_a_first_key() -> None:
    keys: SortedKeys[tuple[str]] = SortedKeys()
    assert list(keys.from_key(("a",))) == list(keys.before_key(("z",))) == []
    keys.discard(("a",))
    keys.add(("b",))
    assert list(keys.from_key(("a",))) == [("b",)] and list(keys.before_key(("c",))) == [("b",)]
