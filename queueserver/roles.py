"""The server's roles: the primary (the engine, Litestream replicating its generation, the watch for a
newer one) and the standby (following the replica until promoted into a primary, in the same process)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from typing import Any, Callable

from queueserver.auth import Authenticator
from queueserver.clock import Clock, ManualClock, SystemClock
from queueserver.config import ServerConfig
from queueserver.errors import StartupError
from queueserver.replication import Replicator, binary, generations, replica
from queueserver.replication.follower import Follower
from queueserver.standby import Standby
from queueserver.storage import QueueEngine
from queueserver.storage.generation import read_generation

log = logging.getLogger(__name__)


def replicator_for(config: ServerConfig) -> Replicator | None:
    """Litestream's supervisor for --replicate (StartupError now if the extra or a setting is missing)."""
    if config.replicate is None:
        for name in ("replica_endpoint", "replica_key", "replica_host_key"):
            if getattr(config, name) is not None:
                raise StartupError(f"--{name.replace('_', '-')} is for a replica: give --replicate URL too")
        return None
    target = replica(config.replicate, config.replica_endpoint, config.replica_key, config.replica_sync_interval,
                     config.replica_host_key)
    return Replicator(os.path.realpath(config.db_path), target)


def _checkpoints_follow(engine: QueueEngine) -> Callable[[bool], None]:
    """While Litestream runs it checkpoints the WAL, and the server's connection does not (replication/)."""
    pending: set[asyncio.Task] = set()

    def done(task: asyncio.Task, running: bool) -> None:
        pending.discard(task)
        if task.cancelled():
            return
        if task.exception() is not None:
            log.warning("could not switch the server's own checkpoints: %s", task.exception())
        elif running:
            log.info("Litestream runs: it checkpoints the WAL, the server's own checkpoints are off")
        else:
            log.warning("Litestream is down: the server checkpoints the WAL itself until it is back")

    def on_running(running: bool) -> None:
        if engine.health.stopping:
            return
        task = asyncio.ensure_future(engine.checkpoint_at_commit(not running))
        pending.add(task)
        task.add_done_callback(functools.partial(done, running=running))

    return on_running


class Roles:
    """What the run has open: the primary's engine and Litestream (from the start, or from a promotion),
    a standby's follower; and why the server stopped if a newer generation fenced it."""

    def __init__(self) -> None:
        self.engine: QueueEngine | None = None
        self.replicator: Replicator | None = None
        self.fence: asyncio.Task | None = None
        self.standby: Standby | None = None
        self.fenced: str | None = None

    def begin_shutdown(self) -> None:
        if self.engine is not None:
            self.engine.begin_shutdown()

    async def close(self) -> None:
        if self.fence is not None:
            self.fence.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.fence
        if self.engine is not None:
            await self.engine.close()
            log.info("database closed")
        if self.replicator is not None:  # last: it uploads what the final commits wrote
            await self.replicator.stop()
        if self.standby is not None and not self.standby.promoted:
            await self.standby.close()
            await self.standby.follower.stop()


async def open_primary(config: ServerConfig, roles: Roles, generation: int | None,
                        on_fenced: Callable[[str], None]) -> QueueEngine:
    """The engine, and Litestream replicating to the file's generation (`generation`: a promotion's new one),
    after checking that no newer generation fenced this database (StartupError if one did)."""
    replicator = replicator_for(config)
    if replicator is not None:
        own = read_generation(os.path.realpath(config.db_path)) if generation is None else generation
        base = replicator.target
        if await asyncio.get_running_loop().run_in_executor(None, generations.exists, replicator.program,
                                                            generations.generation_replica(base, own + 1)):
            raise StartupError(generations.fenced_message(base, own))
        replicator = Replicator(os.path.realpath(config.db_path), generations.generation_replica(base, own))
        replicator.status.generation = own
    clock: Clock = ManualClock() if config.test_clock else SystemClock()
    engine = await QueueEngine.open(
        config.db_path, clock, enforce_cooldowns=config.enforce_cooldowns,
        in_flight_limit=config.in_flight_limit, fifo_in_flight_limit=config.fifo_in_flight_limit,
        counts_max_age=config.counts_max_age, max_subscriptions=config.max_subscriptions)
    roles.engine = engine
    if replicator is not None:
        roles.replicator = replicator
        replicator.on_running = _checkpoints_follow(engine)
        engine.guard_write_backs(replicator.paused)
        engine.health.watch_task(await replicator.start(), "the Litestream supervisor")
        roles.fence = asyncio.create_task(_watch_generation(replicator, base, own, on_fenced))
    return engine


async def _watch_generation(replicator: Replicator, base: Any, own: int, on_fenced: Callable[[str], None]) -> None:
    """Every FENCE_SECONDS: a newer generation in the replica means a standby was promoted in this
    server's place, which must then stop writing (replication/generations.py)."""
    loop = asyncio.get_running_loop()
    newer = generations.generation_replica(base, own + 1)
    while True:
        await asyncio.sleep(generations.FENCE_SECONDS)
        try:
            found = await loop.run_in_executor(None, generations.exists, replicator.program, newer)
        except StartupError as exc:  # the replica cannot be listed now: Litestream reports that too
            log.warning("could not look for a newer replica generation: %s", exc)
            continue
        if found:
            on_fenced(generations.fenced_message(base, own))
            return


def standby_for(config: ServerConfig, authenticator: Authenticator | None,
                open_primary: Callable[[int], Any], open_reader: Callable[[Any], Any]) -> Standby:
    """A standby of the newest generation of --from's replica (the copy at --db)."""
    base = replica(config.replicate or "", config.replica_endpoint, config.replica_key,
                   config.replica_sync_interval, config.replica_host_key)
    program = binary()
    follower = Follower(os.path.realpath(config.db_path), base, generations.newest(program, base), program)
    return Standby(follower, os.path.realpath(config.db_path), config.max_body_bytes, authenticator,
                   open_primary, open_reader)
