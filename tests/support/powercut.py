"""Power cuts under a real server: the powercut_fs.py mount, and the crash workload run across cuts
(no pytest in here).

A cut freezes the server (SIGSTOP, so it sends nothing more), kills the filesystem process (every
write not yet synced is gone with its memory), kills the server and detaches the mount. The next
mount shows only what was synced, and a new server starts on it. Half the cuts (at random) first
let a random half of the unsynced pages, and maybe the directory, reach the disk, as a disk's
cache may: recovery must cope with any such mix, not only with a clean loss.
"""

from __future__ import annotations

import queue as queue_module
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from support.clients import never_retrying_client as make_client
from support.crash_ledger import ACKED, Figures, Ledger, verify
from support.crash_workload import QUEUE_NAME, SharedEndpoint, Workload, drain, kept_servers
from support.server import Server, ServerError, advance_clock, integrity, start_server

FS_SCRIPT = Path(__file__).resolve().parent / "powercut_fs.py"


class PowerCutMount:
    """One powercut_fs.py process serving `backing` at `point`; `cut` is the power failure."""

    def __init__(self, backing: Path, point: Path, log_dir: Path) -> None:
        self.backing, self.point, self.log_dir = backing, point, log_dir
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue_module.Queue[str | None] = queue_module.Queue()
        self.mounts = 0

    def mount(self) -> None:
        if self.mounts == 0:
            self.backing.mkdir()
            self.point.mkdir()
        self.mounts += 1
        self._lines = queue_module.Queue()
        stderr = open(self.log_dir / f"powercut_fs.{self.mounts}.log", "w")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen([sys.executable, str(FS_SCRIPT), str(self.backing), str(self.point)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
        stderr.close()
        lines = self._lines
        proc = self.proc

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line.strip())
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        if self._next_line(15) != "MOUNTED":
            self.kill()
            raise AssertionError(f"powercut_fs did not mount {self.point}:\n"
                                 f"{(self.log_dir / f'powercut_fs.{self.mounts}.log').read_text()}")

    def _next_line(self, timeout: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue_module.Empty:
            return None

    def command(self, line: str) -> str:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self._next_line(10)
        assert answer is not None and answer.startswith("ok"), f"powercut_fs answered {answer!r} to {line!r}"
        return answer

    def cut(self, server: Server | None = None, spill_seed: int | None = None) -> None:
        """The power failure: nothing that was not synced survives it, except (with `spill_seed`)
        a random part of it that the disk happened to write first."""
        if server is not None and server.running:
            server.send_signal(signal.SIGSTOP)
        if spill_seed is not None:
            self.command(f"spill {spill_seed}")
        self.kill()
        if server is not None:
            server.kill()

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(10)
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:  # a broken pipe to the dead process
                    pass
            self.proc = None
        # A dead FUSE mount fails every stat (ENOTCONN), so detach it without asking.
        subprocess.run(["umount", "-l", str(self.point)], capture_output=True, timeout=30, check=False)


def power_run(workdir: Path, cuts: int, seconds_between: tuple[float, float], lying: bool = False,
              seed: int | None = None, say: Any = print) -> Figures:
    """Serve on a powercut_fs mount under the crash workload, cut the power `cuts` times (restarting
    each time on what survived), then drain on an honest mount and check the records.

    `lying`: the filesystem acknowledges syncs without making anything durable (after the queue
    is created), and no cut spills, so acknowledged work must be lost: the test of the test.
    """
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    fs = PowerCutMount(workdir / "disk", workdir / "mnt", logs)
    db = fs.point / "queue.db"
    rng = random.Random(seed)
    spills = 0  # cuts after which part of the unsynced writes reached the disk anyway
    try:
        with kept_servers(say) as servers:
            fs.mount()
            server = start_server(db, log_dir=logs, strict=False)
            servers.append(server)
            make_client(server.endpoint).create_queue(QueueName=QUEUE_NAME)
            if lying:
                fs.command("lying on")
            shared = SharedEndpoint(server.endpoint)
            ledger = Ledger()
            workload = Workload(shared, ledger, seed=seed)
            workload.start()
            try:
                for k in workload.disruptions(cuts, rng, seconds_between):
                    ledger.events.append((time.time(), f"power cut under {server.endpoint}"))
                    spill = not lying and rng.random() < 0.5
                    spills += spill
                    fs.cut(server, rng.randrange(1 << 30) if spill else None)
                    fs.mount()
                    if lying:
                        fs.command("lying on")
                    server = start_server(db, log_dir=logs, strict=False)
                    servers.append(server)
                    shared.set(server.endpoint)
                    ledger.events.append((time.time(), f"ready {server.endpoint}"))
                time.sleep(rng.uniform(*seconds_between))
                spill = not lying and rng.random() < 0.5
                spills += spill
                fs.cut(server, rng.randrange(1 << 30) if spill else None)  # the last one under load too
            finally:
                workload.stop()
            if workload.failures:
                raise RuntimeError(f"a worker failed: {workload.failures!r}")
            fs.mount()
            checker = start_server(db, "--test-clock", log_dir=logs, strict=False)
            servers.append(checker)
            advance_clock(checker.endpoint, 13 * 3600)
            drained = drain(checker.endpoint, ledger)
            rc = checker.stop()
            if rc != 0:
                raise ServerError(f"the final server exited {rc} after SIGTERM\n{checker.stderr_text()}")
            figures = verify(ledger, drained, cuts + 1, integrity(db))
            with ledger.lock:
                acked = sum(1 for outcome, _ in ledger.sends.values() if outcome == ACKED)
            say(f"power cuts: {cuts + 1} ({spills} with part of the unsynced writes on disk), "
                f"acknowledged sends checked: {acked}, "
                f"acknowledged deletes checked: {figures.acked_deletes}")
            return figures
    finally:
        fs.kill()
