"""Restore points: the moments a replica can bring the database back to, and the one for a time.

Litestream 0.5 keeps the changes as LTX files, each ending at a transaction id, stamped with the
second it was read from the log (`litestream ltx -level all -json` lists them). Every file's end is a
point the database can be restored to (`litestream restore -txid`). Its own `-timestamp` option
refuses any moment after the newest file ("timestamp does not exist", measured with 0.5.17), so a
time is turned into a transaction id here: the newest point stamped before it. A stamp is a whole
second, the point anywhere within it: a point counts as before `--at` only when its whole second is.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from queueserver.errors import StartupError
from queueserver.replication.litestream import Replica, environment, last_message, write_config


@dataclass(frozen=True, order=True)
class RestorePoint:
    """The database as it was after transaction `txid`, written to the replica within `second`."""

    txid: int
    second: datetime

    @property
    def hex_txid(self) -> str:
        return f"{self.txid:016x}"


def parse_moment(text: str) -> datetime:
    """`--at`: an ISO 8601 time (2026-01-01T12:00:00Z, with a fraction or an offset); UTC without one."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise StartupError(f"--at {text!r}: expected a time like 2026-01-01T12:00:00Z") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def restore_points(program: str, target: Replica) -> list[RestorePoint]:
    """Every point of the replica `target`, oldest first (StartupError with Litestream's words)."""
    with tempfile.TemporaryDirectory(prefix="queueserver-points-") as folder:
        db = str(Path(folder) / "listed.db")  # the config names a database; nothing is written there
        config = write_config(Path(folder), db, target, level="error")
        done = subprocess.run([program, "ltx", "-config", str(config), "-level", "all", "-json", db],
                              env=environment(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              check=False)
    if done.returncode != 0:
        said = last_message(done.stderr + done.stdout) or f"exit status {done.returncode}"
        raise StartupError(f"cannot list the replica's restore points: {said}")
    try:
        files = json.loads(done.stdout or "[]")
        points = {RestorePoint(int(f["max_txid"], 16), parse_moment(f["timestamp"])) for f in files or []}
    except (ValueError, KeyError, TypeError, StartupError):
        raise StartupError("cannot list the replica's restore points: Litestream's listing was not understood") \
            from None
    earliest: dict[int, RestorePoint] = {}
    for point in sorted(points):  # a transaction in several levels: its earliest stamp
        if point.txid not in earliest or point.second < earliest[point.txid].second:
            earliest[point.txid] = point
    return sorted(earliest.values())


def point_before(points: list[RestorePoint], moment: datetime) -> RestorePoint:
    """The newest point whose whole second is over by `moment`, or StartupError naming the oldest there is."""
    before = [p for p in points if p.second + timedelta(seconds=1) <= moment]
    if not before:
        oldest = f"the oldest is {points[0].second.isoformat()}" if points else "the replica has none"
        raise StartupError(f"no restore point before {moment.isoformat()}: {oldest} (queueserver restore --list)")
    return max(before, key=lambda p: p.txid)
