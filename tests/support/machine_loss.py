"""Losing the machine, and what the replica brings back (no pytest in here).

A server replicates with Litestream (`--replicate`) while the crash workload sends, receives,
deletes and changes visibility. Then the machine is lost: Litestream and the server are
SIGKILLed together and the folder with the database, its WAL, its SHM and Litestream's local
state is deleted. `queueserver restore` rebuilds the database from the replica into a fresh
folder, a `--test-clock` server starts there, its clock moves 13 hours (past every visibility
timeout) and the queue is drained. Counted against the records:

* missing: acknowledged sends (never deleted) that did not come back; those acknowledged more
  than `window` seconds before the loss must all be back;
* returned: messages whose delete was acknowledged (inside their visibility window) but that
  came back; none deleted more than `window` seconds before the loss may;
* the loss window measured (RPO): from the oldest acknowledgment that did not survive to the loss;
* the restored file's integrity check, and how long the restore took.

tests/crash/test_machine_loss.py runs it on a folder, S3 (moto's) and sftp replica; the soak run
(`pytest -m soak tests/crash`) measures the loss window over many losses with it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from support.clients import never_retrying_client as make_client
from support.crash_workload import ACKED, QUEUE_NAME, Ledger, SharedEndpoint, Workload, drain
from support.server import Server, advance_clock, integrity, run_queueserver, start_server, wait_for

MONITOR_SECONDS = 1.0  # Litestream reads the WAL every second (its monitor interval)
READY_TIMEOUT_S = 30.0


@dataclass
class LossFigures:
    window: float  # seconds before the loss inside which changes may be lost
    acked_sends: int = 0
    acked_deletes: int = 0
    restored: int = 0
    missing_in_window: int = 0
    missing_before_window: list[str] = field(default_factory=list)
    returned_in_window: int = 0
    returned_before_window: list[str] = field(default_factory=list)
    loss_window_seconds: float = 0.0  # the measured RPO
    restore_seconds: float = 0.0
    integrity: str = "?"

    @property
    def ok(self) -> bool:
        return not self.missing_before_window and not self.returned_before_window and self.integrity == "ok"

    def report(self) -> str:
        return "\n".join([
            f"window: {self.window:g} s",
            f"sends acknowledged: {self.acked_sends}; deletes acknowledged: {self.acked_deletes}",
            f"restored and drained: {self.restored}",
            f"missing: {self.missing_in_window} inside the window, {len(self.missing_before_window)} before it "
            f"{self.missing_before_window[:5]}",
            f"deleted but back: {self.returned_in_window} inside the window, {len(self.returned_before_window)} "
            f"before it {self.returned_before_window[:5]}",
            f"loss window measured: {self.loss_window_seconds:.2f} s; restore: {self.restore_seconds:.2f} s",
            f"integrity: {self.integrity}",
        ])


def replication(endpoint: str, key_id: str | None = None) -> dict[str, object]:
    """The `replication` object of GET /ready (with credentials on, signed by `key_id`, a key allowed
    queueserver:GetMetrics: to others /ready says only ready or not)."""
    url = f"{endpoint}/ready"
    if key_id is not None:
        from support.auth import presign

        url = presign(url, key_id, 60)
    with urllib.request.urlopen(url, timeout=10) as response:
        return dict(json.loads(response.read())["replication"])


def wait_until_replicating(server: Server, timeout: float = READY_TIMEOUT_S, key_id: str | None = None) -> None:
    """Until Litestream has reported the replica's position (its first snapshot is up)."""

    def replicating() -> bool:
        if not server.running:
            raise AssertionError(f"the server exited before replication started\n{server.stderr_text()}")
        return replication(server.endpoint, key_id).get("transactions_behind") is not None

    wait_for(replicating, "replication to start", timeout, interval=0.1, detail=server.stderr_text)


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def lose_the_machine(server: Server) -> float:
    """SIGKILL Litestream and the server at once (the server's children first); returns the moment."""
    for child in children(server.pid):
        os.kill(child, signal.SIGKILL)
    server.send_signal(signal.SIGKILL)
    lost_at = time.time()
    server.kill()  # reaped
    return lost_at


def restore(replica_args: list[str], db: Path) -> float:
    """`queueserver restore` of the replica into `db`; returns its seconds (raises if it fails)."""
    options = dict(zip(replica_args[::2], replica_args[1::2]))
    argv = ["restore", "--from", options["--replicate"], "--db", str(db)]
    for option in ("--replica-endpoint", "--replica-key", "--replica-host-key"):
        if option in options:
            argv += [option, options[option]]
    began = time.perf_counter()
    done = run_queueserver(*argv, timeout=1800)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"queueserver restore exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return seconds


def loss_run(workdir: Path, replica_args: list[str], seconds: float, *, sync_interval: float = 1.0,
             seed: int | None = None, log_dir: Path | None = None) -> LossFigures:
    """Load for `seconds`, lose the machine, restore, drain, count (see the module's docstring)."""
    primary, fresh = workdir / "primary", workdir / "fresh"
    primary.mkdir()
    fresh.mkdir()
    logs = log_dir or workdir
    servers: list[Server] = []
    try:
        server = start_server(primary / "queueserver.db", *replica_args, "--replica-sync-interval",
                              f"{sync_interval:g}", log_dir=logs, strict=False)
        servers.append(server)
        make_client(server.endpoint).create_queue(QueueName=QUEUE_NAME)
        wait_until_replicating(server)
        ledger = Ledger()
        workload = Workload(SharedEndpoint(server.endpoint), ledger, seed=seed)
        workload.start()
        try:
            time.sleep(seconds)
            lost_at = lose_the_machine(server)
        finally:
            workload.stop()
        if workload.failures:
            raise RuntimeError(f"a worker failed: {workload.failures!r}")
        shutil.rmtree(primary)  # the disk is gone: database, WAL, SHM and Litestream's own state
        figures = LossFigures(window=sync_interval + MONITOR_SECONDS)
        restored_db = fresh / "queueserver.db"
        figures.restore_seconds = restore(replica_args, restored_db)
        checker = start_server(restored_db, "--test-clock", log_dir=logs, strict=False)
        servers.append(checker)
        advance_clock(checker.endpoint, 13 * 3600)  # past every visibility timeout, inside retention
        drained = drain(checker.endpoint, ledger)
        checker.stop()
        figures.integrity = integrity(restored_db)
        count(figures, ledger, drained, lost_at)
        return figures
    finally:
        for s in servers:
            s.kill()


def count(figures: LossFigures, ledger: Ledger, drained: dict[str, tuple[str, int]], lost_at: float) -> None:
    deadline = lost_at - figures.window
    figures.restored = len(drained)
    oldest_missing = None
    for body, (outcome, mid) in ledger.sends.items():
        if outcome != ACKED:
            continue
        figures.acked_sends += 1
        if body in drained or mid in ledger.delete_attempts:
            continue
        acked_at = ledger.send_trace[body][1]
        oldest_missing = acked_at if oldest_missing is None else min(oldest_missing, acked_at)
        if acked_at < deadline:
            figures.missing_before_window.append(f"{mid} acknowledged {lost_at - acked_at:.2f} s before the loss")
        else:
            figures.missing_in_window += 1
    figures.loss_window_seconds = 0.0 if oldest_missing is None else lost_at - oldest_missing
    figures.acked_deletes = len(ledger.effective_deletes)
    drained_ids = {mid for mid, _ in drained.values()}
    for mid, deleted_at in ledger.effective_deletes.items():
        if mid not in drained_ids:
            continue
        if deleted_at < deadline:
            figures.returned_before_window.append(f"{mid} deleted {lost_at - deleted_at:.2f} s before the loss")
        else:
            figures.returned_in_window += 1


__all__ = ["LossFigures", "loss_run", "replication", "wait_until_replicating"]
