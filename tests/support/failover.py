"""Failover under load, and what it costs (no pytest in here).

A primary replicates to a folder while the crash workload sends, receives, deletes and changes
visibility; a standby (`queueserver standby`) follows the replica. Then, `kills` times: once the
workload has had more sends acknowledged, the primary and its Litestream are SIGKILLed, the standby
is promoted (`queueserver promote`), the workers move to it, and a new standby starts following the
new generation. At the end the last primary is stopped, a `--test-clock` server starts on its file,
the clock moves 13 hours and the queue is drained. Counted against the records:

* RTO, per kill: from the kill to the first send acknowledged after it (only the promoted server can
  acknowledge one then);
* missing: acknowledged sends (never deleted) that did not come back; those acknowledged more than
  `window` seconds before the kill that followed them must all be back (the RPO);
* returned: messages whose delete was acknowledged inside their visibility window but came back.
  Allowed only around a kill: deleted within `window` before it, or deleted after it, within
  STALE_HANDLE_SECONDS, with a receipt handle of the old primary whose receive was inside the window
  (the new primary never saw that receive; a stale handle deletes nothing on a standard queue, as SQS);
* the final file's integrity check.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.clients import never_retrying_client as make_client
from support.crash_workload import ACKED, QUEUE_NAME, Ledger, SharedEndpoint, Workload, drain
from support.machine_loss import MONITOR_SECONDS, lose_the_machine, wait_until_replicating
from support.metrics import health, scrape
from support.server import advance_clock, integrity, start_server, wait_for

from queueserver.testing import QueueServer

SYNC_INTERVAL = 1.0
STALE_HANDLE_SECONDS = 8.0  # a held handle lives at most RECEIVE_VT + EXTEND_VT (+ margin) after its receive
SENDS_BETWEEN_KILLS = 800  # several seconds of load: each kill's window holds only its own server's work


@dataclass
class FailoverFigures:
    window: float = SYNC_INTERVAL + MONITOR_SECONDS
    kills: list[float] = field(default_factory=list)
    rto_seconds: list[float] = field(default_factory=list)
    promote_seconds: list[float] = field(default_factory=list)
    acked_sends: int = 0
    acked_deletes: int = 0
    drained: int = 0
    missing_in_window: int = 0
    missing_before_window: list[str] = field(default_factory=list)
    loss_windows: list[float] = field(default_factory=list)  # per kill: the oldest lost acknowledgment's age
    returned_around_kills: int = 0
    returned_elsewhere: list[str] = field(default_factory=list)
    integrity: str = "?"

    @property
    def ok(self) -> bool:
        return not self.missing_before_window and not self.returned_elsewhere and self.integrity == "ok"

    def report(self) -> str:
        return "\n".join([
            f"kills: {len(self.kills)}; window: {self.window:g} s",
            "RTO (kill to first acknowledged send): " + ", ".join(f"{s:.2f} s" for s in self.rto_seconds),
            "promotion request: " + ", ".join(f"{s:.2f} s" for s in self.promote_seconds),
            "RPO (oldest lost acknowledgment before a kill): " + ", ".join(f"{s:.2f} s" for s in self.loss_windows),
            f"sends acknowledged: {self.acked_sends}; deletes acknowledged: {self.acked_deletes}; "
            f"drained: {self.drained}",
            f"missing: {self.missing_in_window} inside the window, {len(self.missing_before_window)} before it "
            f"{self.missing_before_window[:5]}",
            f"deleted but back: {self.returned_around_kills} around a kill, {len(self.returned_elsewhere)} "
            f"elsewhere {self.returned_elsewhere[:5]}",
            f"integrity: {self.integrity}",
        ])


def start_standby(db: Path, replica: Path, log_dir: Path) -> QueueServer:
    return QueueServer(db, test_clock=False, command="standby", extra_args=("--from", str(replica)),
                       log_path=log_dir / f"{db.name}.standby.log", ready_timeout=60).start()


def following(endpoint: str) -> None:
    """Until the standby's copy holds everything its replica has (GET /ready)."""
    def current() -> bool:
        status, body = health(endpoint, "/ready")
        return status == 503 and body.get("replication", {}).get("transactions_behind") == 0

    wait_for(current, "the standby to follow the replica", timeout=60, interval=0.05)


def promote(endpoint: str) -> None:
    done = subprocess.run([sys.executable, "-m", "queueserver", "promote", "--endpoint", endpoint],
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"promote failed ({done.returncode}): {done.stdout}{done.stderr}")


def acked_sends(ledger: Ledger) -> int:
    with ledger.lock:
        return sum(1 for outcome, _ in ledger.sends.values() if outcome == ACKED)


def first_ack_after(ledger: Ledger, moment: float) -> float | None:
    """When the first send started after `moment` was acknowledged (one started before may have been
    answered by the killed server, its answer already on the wire)."""
    with ledger.lock:
        acks = [trace[1] for body, trace in ledger.send_trace.items()
                if trace[0] > moment and ledger.sends[body][0] == ACKED]
    return min(acks, default=None)


def failover_run(workdir: Path, kills: int) -> FailoverFigures:
    replica, logs = workdir / "replica", workdir / "logs"
    logs.mkdir()
    figures = FailoverFigures()
    primary: QueueServer = start_server(workdir / "db0" / "queueserver.db", "--replicate", str(replica),
                                        "--replica-sync-interval", f"{SYNC_INTERVAL:g}", log_dir=logs, strict=False)
    servers = [primary]
    try:
        make_client(primary.endpoint).create_queue(QueueName=QUEUE_NAME)
        wait_until_replicating(primary)
        ledger = Ledger()
        shared = SharedEndpoint(primary.endpoint)
        workload = Workload(shared, ledger)
        standby = start_standby(workdir / "db1" / "queueserver.db", replica, logs)
        servers.append(standby)
        workload.start()
        try:
            for k in range(kills):
                following(standby.endpoint)
                target = acked_sends(ledger) + SENDS_BETWEEN_KILLS
                wait_for(lambda: acked_sends(ledger) >= target or workload.failures, "sends under load", timeout=120)
                lost_at = lose_the_machine(primary)
                figures.kills.append(lost_at)
                began = time.time()
                promote(standby.endpoint)
                figures.promote_seconds.append(time.time() - began)
                shared.set(standby.endpoint)
                first = wait_for(lambda: first_ack_after(ledger, lost_at), "a send acknowledged by the promoted "
                                 "server", timeout=60)
                figures.rto_seconds.append(first - lost_at)
                primary = standby
                if k + 1 < kills:
                    wait_until_replicating(primary)  # else the next standby may start on the old generation
                    standby = start_standby(workdir / f"db{k + 2}" / "queueserver.db", replica, logs)
                    servers.append(standby)
        finally:
            workload.stop()
        if workload.failures:
            raise RuntimeError(f"a worker failed: {workload.failures!r}")
        primary.stop()
        checker = start_server(primary.db_path, "--test-clock", log_dir=logs, strict=False)
        servers.append(checker)
        advance_clock(checker.endpoint, 13 * 3600)
        drained = drain(checker.endpoint, ledger)
        checker.stop()
        figures.integrity = integrity(primary.db_path)
        count(figures, ledger, drained)
        return figures
    finally:
        for server in servers:
            server.kill()


def count(figures: FailoverFigures, ledger: Ledger, drained: dict[str, tuple[str, int]]) -> None:
    figures.drained = len(drained)
    oldest_lost: dict[float, float] = {}
    for body, (outcome, mid) in ledger.sends.items():
        if outcome != ACKED:
            continue
        figures.acked_sends += 1
        if body in drained or mid in ledger.delete_attempts:
            continue
        started, acked_at, _ = ledger.send_trace[body]
        # The kill that followed the send's start: an answer already on the wire may arrive after the kill.
        kill = min((k for k in figures.kills if k >= started), default=None)
        if kill is None or kill - min(acked_at, kill) > figures.window:
            where = "after the last kill" if kill is None else f"{kill - acked_at:.2f} s before a kill"
            figures.missing_before_window.append(f"{mid} acknowledged {where}")
        else:
            figures.missing_in_window += 1
        if kill is not None:
            oldest_lost[kill] = max(oldest_lost.get(kill, 0.0), kill - min(acked_at, kill))
    figures.loss_windows = [oldest_lost.get(k, 0.0) for k in figures.kills]
    figures.acked_deletes = len(ledger.effective_deletes)
    drained_ids = {mid for mid, _ in drained.values()}
    for mid, deleted_at in ledger.effective_deletes.items():
        if mid not in drained_ids:
            continue
        if any(k - figures.window <= deleted_at <= k + STALE_HANDLE_SECONDS for k in figures.kills):
            figures.returned_around_kills += 1
        else:
            figures.returned_elsewhere.append(f"{mid} deleted at {deleted_at:.2f}")


def promoted_metrics(endpoint: str) -> tuple[float, float]:
    """(role primary gauge, generation) of a server's /metrics."""
    scraped = scrape(endpoint)
    return scraped.value("queueserver_role", role="primary"), scraped.value("queueserver_replication_generation")


__all__ = ["FailoverFigures", "failover_run", "following", "promote", "start_standby"]
