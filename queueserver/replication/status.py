"""How far the replica is behind, and the last error, read from Litestream's own log records.

Litestream 0.5 has no figure for the replica's position on its metrics endpoint (only the
local one) and its `status` command shows the local one only; its debug records do say it:
every upload round logs `replica sync` with the replica's and the database's transaction ids
(a Litestream transaction is one read of new WAL frames, about one a second under writes).
The supervisor reads the child's output anyway, so these records cost a JSON parse each,
a few a second, and no request to anyone: no listing of the replica, no second endpoint.

The lag: 0 when the replica holds everything Litestream has read from the WAL; otherwise the
seconds since Litestream first reported the oldest transaction the replica lacks. The WAL is
read every second, so a change can be one more second older than that. When Litestream is not
running, or has reported nothing for a few upload rounds, the lag is at least the time since
(nobody knows what the replica lacks then, so the figure says the worst).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

MAX_TRACKED = 10_000  # transactions behind whose first report is kept (a few hours of writes)


@dataclass(frozen=True)
class ReplicationReport:
    """What /metrics, /ready and the console show of the replication."""

    replica: str  # the URL, without a password
    running: bool
    lag_seconds: float | None  # None until Litestream has reported a position
    transactions_behind: int | None
    restarts: int
    errors: int
    last_error: tuple[float, str] | None  # (epoch seconds, what Litestream or the supervisor said)
    supervisor_failures: int = 0  # times the supervisor itself failed and was started again
    role: str = "primary"  # or "standby": following the replica rather than writing it
    generation: int = 0  # of the replica written or followed (replication/generations.py)

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "generation": self.generation, "replica": self.replica, "running": self.running, "lag_seconds": self.lag_seconds,
                "transactions_behind": self.transactions_behind, "restarts": self.restarts,
                "errors": self.errors, "last_error": None if self.last_error is None else {
                    "at": self.last_error[0], "message": self.last_error[1]},
                "supervisor_failures": self.supervisor_failures}


def _first_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Litestream's records can carry `level` twice (the log level, then a compaction level): keep the first."""
    record: dict[str, Any] = {}
    for key, value in pairs:
        record.setdefault(key, value)
    return record


def parse(line: str) -> dict[str, Any] | None:
    """One of Litestream's JSON log records, or None for any other line (a Go panic's trace, say)."""
    try:
        record = json.loads(line, object_pairs_hook=_first_keys)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "msg" in record else None


class ReplicationStatus:
    """Fed every record by the supervisor (on the event loop); `report()` reads it at any time."""

    def __init__(self, replica: str, sync_interval: float = 1.0, monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.replica = replica
        self._silence = 3 * sync_interval + 2  # no report for this long: something is stuck
        self._running = False
        self._since = monotonic()  # of the last start or stop, or of the last report
        self.restarts = 0
        self.errors = 0
        self.supervisor_failures = 0
        self.last_error: tuple[float, str] | None = None
        self.generation = 0
        self._monotonic = monotonic
        self._wall = wall
        self._replica_txid: int | None = None
        self._db_txid: int | None = None
        self._first_seen: dict[int, float] = {}  # database txids the replica lacks: when first reported

    @property
    def running(self) -> bool:
        return self._running

    @running.setter
    def running(self, running: bool) -> None:
        self._running = running
        self._since = self._monotonic()

    def note(self, record: dict[str, Any]) -> None:
        if record.get("msg") == "replica sync" and isinstance(record.get("txid"), dict):
            try:
                replica_txid = int(record["txid"]["replica"], 16)
                db_txid = int(record["txid"]["db"], 16)
            except (KeyError, TypeError, ValueError):
                return
            self._position(replica_txid, db_txid)
        if record.get("level") in ("ERROR", "WARN"):
            error = record.get("error")
            self.error(f"{record['msg']}: {error}" if error else str(record["msg"]))

    def supervisor_failed(self, why: str) -> None:
        self.supervisor_failures += 1
        self.error(f"the supervisor failed ({why}); it is started again")

    def error(self, message: str) -> None:
        self.errors += 1
        self.last_error = (self._wall(), message)

    def _position(self, replica_txid: int, db_txid: int) -> None:
        now = self._since = self._monotonic()
        if self._db_txid is not None and db_txid < self._db_txid:  # a fresh start (a restore, a reset)
            self._first_seen.clear()
        first = max(replica_txid, self._db_txid or 0, db_txid - MAX_TRACKED) + 1
        for txid in range(first, db_txid + 1):
            self._first_seen.setdefault(txid, now)
        for txid in [t for t in self._first_seen if t <= replica_txid]:
            del self._first_seen[txid]
        self._replica_txid, self._db_txid = replica_txid, db_txid

    def report(self) -> ReplicationReport:
        lag = behind = None
        if self._db_txid is not None and self._replica_txid is not None:
            behind = max(0, self._db_txid - self._replica_txid)
            oldest = min(self._first_seen.values(), default=None)
            lag = 0.0 if behind == 0 or oldest is None else self._monotonic() - oldest
        quiet = self._monotonic() - self._since
        if not self._running or quiet > self._silence:
            lag = max(lag or 0.0, quiet)
        lag = None if lag is None else round(lag, 3)
        return ReplicationReport(self.replica, self._running, lag, behind, self.restarts, self.errors,
                                 self.last_error, self.supervisor_failures, generation=self.generation)
