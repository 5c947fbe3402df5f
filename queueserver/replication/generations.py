"""Generations: a promoted standby never writes into the history its old primary wrote.

Generation 0 is the replica URL itself (where `--replicate URL` has always written);
generation N is the folder `gen-N` under it (`URL/gen-1`, `URL/gen-2`, ...). A standby follows
the newest generation that holds anything; promoted, it writes generation N+1, into a path
nobody else writes. Every primary knows its own generation (kept in its database file:
storage/generation.py) and checks, at start and every FENCE_SECONDS while it runs, that the
next one is empty: a primary that finds a newer generation has been replaced, and refuses
to write (two writers never interleave in one history).

Whether a generation exists is asked of Litestream (`litestream ltx`, which lists the files of
a replica of any kind: folder, S3, sftp): one listing per check, no other client.
"""

from __future__ import annotations

import dataclasses

from queueserver.replication.litestream import Replica
from queueserver.replication.points import restore_points
from queueserver.replication.supervisor import public_url

FENCE_SECONDS = 5.0  # a primary looks for a newer generation this often
MAX_GENERATIONS = 10_000


def generation_replica(base: Replica, generation: int) -> Replica:
    """Where generation `generation` of the replica `base` lives."""
    if generation == 0:
        return base
    return dataclasses.replace(base, url=f"{base.url.rstrip('/')}/gen-{generation}")


def exists(program: str, target: Replica) -> bool:
    """Whether the replica holds any restore point (StartupError if it cannot be listed)."""
    return bool(restore_points(program, target))


def newest(program: str, base: Replica) -> int:
    """The newest generation of `base` that holds anything (0 when none above it does)."""
    generation = 0
    while generation < MAX_GENERATIONS and exists(program, generation_replica(base, generation + 1)):
        generation += 1
    return generation


def fenced_message(base: Replica, own: int) -> str:
    return (f"the replica {public_url(generation_replica(base, own + 1).url)} holds generation {own + 1}, newer than this "
            f"database's generation {own}: a standby was promoted in its place, so this server must not write; "
            "make it a standby of the new primary (queueserver standby --from the same URL) or restore from it")
