"""A warm standby's copy: `litestream restore -f` keeps a database current with a replica.

The standby runs under umask 077, so the copy Litestream writes is its user's alone (0600), as
every database file. Litestream restores the replica, then applies what the primary uploads (polling every
FOLLOW_INTERVAL), logging "entering follow mode" and "follow: applied updates" with the
transaction ids it reached. It runs under the same supervision as `replicate` (restart with a
backoff, errors kept for /ready), except that it may be silent for as long as the primary
writes nothing. It cannot resume a copy once the primary's newest snapshot is older than the
copy's position (measured: "saved TXID ... is ahead of latest snapshot"), so every start
removes the copy and restores afresh; a copy is recognised by the `-txid` file Litestream keeps
beside it, and a file without one is never removed.

The lag: Litestream's follow mode reports nothing while nothing changes, so every
PROBE_SECONDS the replica's restore points are listed (`litestream ltx`, one listing) and
compared with the copy's position: 0 when the copy holds the newest, else the age of the
oldest point it lacks (points are stamped to the second).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from datetime import datetime, timezone
from typing import Any

from queueserver.errors import StartupError
from queueserver.replication import generations
from queueserver.replication.litestream import Replica, write_config
from queueserver.replication.points import RestorePoint, restore_points
from queueserver.replication.status import ReplicationReport, ReplicationStatus
from queueserver.replication.supervisor import Replicator, public_url

log = logging.getLogger(__name__)

FOLLOW_INTERVAL = "500ms"
CATCH_UP_SECONDS = 5.0  # a promotion waits at most this long for the copy to apply what the replica has
PROBE_SECONDS = 2.0


def copy_files(path: str) -> list[str]:
    return [path, f"{path}-wal", f"{path}-shm", f"{path}-txid"]


def is_followed_copy(path: str) -> bool:
    """A file Litestream's follow mode made (it keeps its position in PATH-txid)."""
    return os.path.exists(f"{path}-txid")


class FollowStatus(ReplicationStatus):
    """The copy's position (from Litestream's records) against the replica's points (from the probe)."""

    def __init__(self, replica: str) -> None:
        super().__init__(replica)
        self.position: int | None = None  # the last transaction the copy holds
        self.following = False  # restored, and applying updates
        self._ahead: list[RestorePoint] = []  # the replica's points beyond the position, at the last probe
        self._probed = False

    def switch(self, replica: str, generation: int) -> None:
        """Now following another generation, from nothing."""
        self.replica, self.generation = replica, generation
        self.position, self.following, self._ahead, self._probed = None, False, [], False

    def note(self, record: dict[str, Any]) -> None:
        message = record.get("msg")
        txid = record.get("txid") if message == "entering follow mode" else record.get("to_txid")
        if message in ("entering follow mode", "follow: applied updates") and isinstance(txid, str):
            with contextlib.suppress(ValueError):
                self.position = int(txid, 16)
                self.following = True
                self._ahead = [p for p in self._ahead if p.txid > self.position]
        if record.get("level") in ("ERROR", "WARN"):
            error = record.get("error")
            self.error(f"{record['msg']}: {error}" if error else str(record["msg"]))

    def probed(self, points: list[RestorePoint]) -> None:
        self._probed = True
        self._ahead = [p for p in points if self.position is None or p.txid > self.position]

    def report(self) -> ReplicationReport:
        lag = behind = None
        if self.following and self._probed:
            behind = len(self._ahead)
            oldest = min((p.second for p in self._ahead), default=None)
            lag = 0.0 if oldest is None else max(0.0, datetime.now(timezone.utc).timestamp() - oldest.timestamp())
        if not self.running:
            quiet = self._monotonic() - self._since
            lag = max(lag or 0.0, quiet)
        lag = None if lag is None else round(lag, 3)
        return ReplicationReport(self.replica, self.running, lag, behind, self.restarts, self.errors,
                                 self.last_error, self.supervisor_failures, role="standby",
                                 generation=self.generation)


class Follower(Replicator):
    """Runs `litestream restore -f` into `db_path`; `report()` says how far behind the copy is."""

    status: FollowStatus

    uses_socket = False  # nothing to upload at the end

    def __init__(self, db_path: str, base: Replica, generation: int, program: str | None = None) -> None:
        if os.path.lexists(db_path) and not is_followed_copy(db_path):
            raise StartupError(f"{db_path} exists and is not a standby's copy: a standby restores into a new "
                               "path (or one it made before); choose another --db or move the file away")
        super().__init__(db_path, generations.generation_replica(base, generation), program)
        self._base = base
        self.silence_seconds = None
        self.status = FollowStatus(self.status.replica)
        self.status.generation = generation
        self._probe: asyncio.Task | None = None

    @property
    def generation(self) -> int:
        """The generation followed now."""
        return self.status.generation

    def generation_exists(self, generation: int) -> bool:
        """Whether the replica holds generation `generation` (blocking: a listing)."""
        return generations.exists(self._program, generations.generation_replica(self._base, generation))

    async def start(self) -> asyncio.Task:
        task = await super().start()
        self._probe = asyncio.create_task(self._probe_forever(), name="standby lag probe")
        return task

    async def stop(self) -> None:
        """Stop following (the copy stays, at the position it reached)."""
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
        await super().stop()

    async def catch_up(self, timeout: float) -> bool:
        """Until the copy holds the newest point the replica has now (a promotion loses nothing the replica
        holds), at most `timeout` seconds; whether it does."""
        loop = asyncio.get_running_loop()
        assert self._config is not None
        try:
            points = await loop.run_in_executor(None, restore_points, self._program, self._target)
        except StartupError as exc:
            log.warning("promotion: %s; promoting at the copy's position", exc)
            return False
        newest = max((p.txid for p in points), default=0)
        deadline = loop.time() + timeout
        while (self.status.position or 0) < newest and loop.time() < deadline and self.status.running:
            await asyncio.sleep(0.05)  # Litestream applies the rest within its follow interval
        return (self.status.position or 0) >= newest

    def _describe(self) -> str:
        return (f"standby: restoring {self.status.replica} into {self._db_path}, then following it with Litestream "
                f"(generation {self.status.generation}; read-only until promoted)")

    def _argv(self) -> list[str]:
        assert self._config is not None
        return [self._program, "restore", "-config", str(self._config), "-f", "-follow-interval", FOLLOW_INTERVAL,
                self._db_path]

    def _before_run(self) -> None:
        self.status.following = False
        for path in copy_files(self._db_path):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    async def _probe_forever(self) -> None:
        """The lag's probe; and a newer generation (a primary promoted since this standby started, whose
        first upload it did not see yet) makes it follow that one instead."""
        loop = asyncio.get_running_loop()
        while True:
            assert self._config is not None
            try:
                newer = generations.generation_replica(self._base, self.generation + 1)
                if await loop.run_in_executor(None, generations.exists, self._program, newer):
                    await self._follow(self.generation + 1)
                points = await loop.run_in_executor(None, restore_points, self._program, self._target)
            except StartupError as exc:
                log.warning("%s", exc)
            else:
                self.status.probed(points)
            await asyncio.sleep(PROBE_SECONDS)

    async def _follow(self, generation: int) -> None:
        """Follow generation `generation` from a fresh restore."""
        newer = generations.generation_replica(self._base, generation)
        log.warning("the replica has a newer generation %d (%s): following it instead", generation,
                    public_url(newer.url))
        assert self._folder is not None
        self._target = newer
        self._config = write_config(self._folder, self._db_path, newer)
        self.status.switch(public_url(newer.url), generation)
        self._stopped_on_purpose = self._proc is not None and self._proc.returncode is None
        await self._end_child()  # the supervisor starts it again at once, on the new config
