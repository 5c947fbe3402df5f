"""The (other) series of /metrics: the tallies of every queue past the first ones, added up chunk by chunk."""

from __future__ import annotations

import random

from queueserver.metrics import _QUEUE_COUNTERS, _summed
from queueserver.tallies import QueueTally


def test_the_queues_after_the_first_ones_are_summed_across_chunks_counter_by_counter_and_bucket_by_bucket() -> None:
    rng = random.Random(3)
    tallies = []
    for queue_id in range(1, 2501):  # three chunks, the last one partial
        tally = QueueTally()
        for name, _, _ in _QUEUE_COUNTERS:
            setattr(tally, name, rng.randrange(50))
        for _ in range(rng.randrange(4)):
            tally.sizes.observe(rng.choice([10, 500, 70_000, 900_000]))
        tallies.append((queue_id, tally))
    rng.shuffle(tallies)  # a dict's order is not the ids'
    total = _summed(dict(tallies), after=250)
    others = [tally for queue_id, tally in tallies if queue_id > 250]
    for name, _, _ in _QUEUE_COUNTERS:
        assert getattr(total, name) == sum(getattr(tally, name) for tally in others), name
    assert total.sizes.counts == [sum(t.sizes.counts[b] for t in others) for b in range(len(total.sizes.counts))]
    assert total.sizes.sum == sum(t.sizes.sum for t in others) > 0
    assert _summed(dict(tallies), after=2500).sent == 0
