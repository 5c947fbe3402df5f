"""Litestream beside the server: started after the database opens, restarted if it dies, stopped last.

The server and Litestream share the write-ahead log, and agree on it like this (docs: Operations,
Replication; measured in docs/benchmarks.md, "Replication"):

- **Checkpoints are Litestream's while it runs.** It reads the WAL holding a read transaction, so
  no checkpoint can restart the log under it; but each checkpoint the server's connection would run
  (SQLite's wal_autocheckpoint, at commit) is work on the writer thread that Litestream does again
  a second later. So `on_running(True)` turns the server's off, and `on_running(False)` turns it
  back on while Litestream is down: the WAL stays bounded, and Litestream, back, sees the log was
  restarted and uploads a fresh snapshot.
- **A write-back pauses it.** When the database file is deleted while the server runs, the server
  writes it back from its open connection (storage/write_back.py) as a new file. Litestream would
  go on checkpointing into the deleted one, through the very WAL the new file uses, and restart
  that log: frames the new file never got. So the database thread holds `paused()` around a
  write-back: Litestream is stopped first and started again on the new file (a fresh snapshot).
- The busy timeout: the writer waits up to 5 s for a lock (sqlite_file.py), far longer than
  Litestream holds one at a checkpoint. The server's fsync thread syncs the log by a descriptor
  of its own; Litestream truncates that file in place, never replaces it, so the descriptor holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

from queueserver.replication.litestream import Replica, binary, environment, write_config
from queueserver.replication.status import ReplicationReport, ReplicationStatus, parse

log = logging.getLogger(__name__)
litestream_log = logging.getLogger("queueserver.litestream")  # the child's own records, passed on

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
STEADY_SECONDS = 60.0  # a run this long resets the backoff
STOP_SECONDS = 10.0  # for the last upload at shutdown, then for the child to exit
SILENCE_SECONDS = 30.0  # it logs a debug record every second: silent this long, it hangs and is restarted
_LEVELS = {"INFO": logging.DEBUG, "WARN": logging.WARNING, "ERROR": logging.ERROR}  # its info: chatty
PR_SET_PDEATHSIG = 1  # prctl(2)
FOLDER_PREFIX = "queueserver-litestream-"  # in the temp folder: Litestream's config and control socket
OWNER_FILE = "server.pid"


def _end_with_the_server() -> None:
    """In the child: SIGTERM when the server dies, even by SIGKILL (Linux's parent-death signal).

    Its own session keeps a Ctrl-C meant for the server from stopping it before its last upload."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def remove_left_behind(folder: Path) -> None:
    """Remove the Litestream folders of servers that are gone (one SIGKILLed had no time to): each
    names its server's process id in OWNER_FILE; a folder whose process is alive is another server's."""
    for left in folder.glob(FOLDER_PREFIX + "*"):
        try:
            owner = int((left / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not one of ours, or still being made
        if owner == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        log.info("removing %s, left behind by a server that ended without stopping (process %d)", left, owner)
        shutil.rmtree(left, ignore_errors=True)


def public_url(url: str) -> str:
    """The URL without a password (sftp://user:secret@host/...), for logs and pages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class BoundedLines:
    """Litestream's output, line by line, read in chunks of at most READ_CHUNK bytes: a line longer than
    MAX_LINE_BYTES is cut there (its rest skipped), so no line can make the reader fail or grow without
    bound, and the child never blocks on a full pipe while the server runs."""

    READ_CHUNK = 16 * 1024
    MAX_LINE_BYTES = 16 * 1024

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream
        self._pending = b""
        self._skipping = False  # the rest of a line already cut
        self._ended = False

    async def next(self) -> bytes | None:
        """The next line (without its newline; an over-long one cut), or None at the end of the output."""
        while True:
            end = self._pending.find(b"\n")
            if end >= 0:
                line, self._pending = self._pending[:end], self._pending[end + 1:]
                if self._skipping:
                    self._skipping = False
                    continue
                return line
            if len(self._pending) > self.MAX_LINE_BYTES:
                line, self._pending = self._pending[:self.MAX_LINE_BYTES], b""
                skipped, self._skipping = self._skipping, True
                if not skipped:
                    return line + b" [cut]"
                continue
            if self._ended:
                line, self._pending = self._pending, b""
                return None if not line or self._skipping else line
            chunk = await self._stream.read(self.READ_CHUNK)
            if not chunk:
                self._ended = True
            self._pending += chunk


class Replicator:
    """Runs `litestream replicate` for one database; `report()` says how far behind the replica is."""

    uses_socket = True  # Litestream's control socket, for the last upload at shutdown

    def __init__(self, db_path: str, target: Replica, program: str | None = None) -> None:
        self._program = program or binary()  # StartupError now, before anything starts, if it is missing
        self._db_path = db_path
        self._target = target
        self.on_running: Callable[[bool], Any] = lambda running: None  # told as Litestream starts and stops
        self.status = ReplicationStatus(public_url(target.url), target.sync_interval)
        self._folder: Path | None = None
        self._config: Path | None = None
        self._socket: str | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._stopped_on_purpose = False  # the run that ends now was ended by a pause
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._woken = asyncio.Event()  # ends a backoff early (a resume, a stop)
        self.silence_seconds: float | None = SILENCE_SECONDS  # None: it may be silent (a follower, idle)

    @property
    def program(self) -> str:
        return self._program

    @property
    def target(self) -> Replica:
        return self._target

    def report(self) -> ReplicationReport:
        return self.status.report()

    async def start(self) -> asyncio.Task:
        """Start Litestream and its supervision; the task is for the caller's health watch."""
        self._loop = asyncio.get_running_loop()
        self._stopping = False  # a follower is started again after a refused promotion
        remove_left_behind(Path(tempfile.gettempdir()))
        self._folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        (self._folder / OWNER_FILE).write_text(str(os.getpid()))
        self._socket = str(self._folder / "control.sock") if self.uses_socket else None
        self._config = write_config(self._folder, self._db_path, self._target, self._socket)
        log.info("%s", self._describe())
        self._task = asyncio.create_task(self._supervise_for_good(), name="litestream supervisor")
        return self._task

    async def stop(self) -> None:
        """After the database is closed: let Litestream upload what is left, then stop it."""
        self._stopping = True
        self._woken.set()
        self._resumed.set()
        if self._proc is not None and self._proc.returncode is None and self._socket is not None:
            await self._last_upload()
        await self._end_child()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Litestream stopped for the block (called on the database thread, around a write-back)."""
        loop = self._loop
        if loop is None or self._stopping:
            yield
            return
        asyncio.run_coroutine_threadsafe(self._pause(), loop).result(timeout=2 * STOP_SECONDS)
        try:
            yield
        finally:
            loop.call_soon_threadsafe(self._resume)

    async def _pause(self) -> None:
        self._resumed.clear()
        self._stopped_on_purpose = self._proc is not None and self._proc.returncode is None
        log.warning("stopping Litestream while the database file is written back; it restarts on the new file "
                    "and uploads a fresh snapshot")
        await self._end_child()

    def _resume(self) -> None:
        self._resumed.set()
        self._woken.set()

    async def _supervise_for_good(self) -> None:
        """The supervision, started again if it fails (reported in /ready's replication section): a
        supervisor that ended would leave Litestream stopped, or blocked on a pipe nobody reads."""
        while not self._stopping:
            try:
                await self._supervise()
                return
            except Exception as exc:  # noqa: BLE001 - whatever it was, replication must go on
                if self._stopping:
                    return
                self.status.supervisor_failed(f"{type(exc).__name__}: {exc}")
                log.error("the Litestream supervisor failed (%s: %s); starting it again in %g s",
                          type(exc).__name__, exc, FIRST_BACKOFF_SECONDS, exc_info=exc)
                self._woken.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), FIRST_BACKOFF_SECONDS)

    async def _supervise(self) -> None:
        backoff = FIRST_BACKOFF_SECONDS
        while not self._stopping:
            await self._resumed.wait()
            if self._stopping:
                return
            began = time.monotonic()
            rc = await self._run_once()
            if self._stopping or self._stopped_on_purpose:
                self._stopped_on_purpose = False
                continue
            if time.monotonic() - began >= STEADY_SECONDS:
                backoff = FIRST_BACKOFF_SECONDS
            self.status.restarts += 1
            self.status.error(f"Litestream exited with status {rc}; restarting in {backoff:g} s")
            log.error("Litestream exited with status %s; restarting it in %g s (until then the replica falls "
                      "behind)", rc, backoff)
            self._woken.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._woken.wait(), backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    def _describe(self) -> str:
        return (f"replicating {self._db_path} to {self.status.replica} with Litestream (uploads every "
                f"{self._target.sync_interval:g} s)")

    def _argv(self) -> list[str]:
        """The Litestream command this supervisor runs."""
        assert self._config is not None
        return [self._program, "replicate", "-config", str(self._config)]

    def _before_run(self) -> None:
        """Called before each start of Litestream (a follower clears a copy it cannot resume)."""

    async def _run_once(self) -> int | None:
        self._before_run()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv(), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=environment(),
                start_new_session=True, preexec_fn=_end_with_the_server)
        except OSError as exc:
            self.status.error(f"Litestream could not be started: {exc}")
            return None
        self._proc = proc
        self.status.running = True
        try:
            self.on_running(True)
            assert proc.stdout is not None
            lines = BoundedLines(proc.stdout)
            while True:
                try:
                    line = await asyncio.wait_for(lines.next(), self.silence_seconds)
                except asyncio.TimeoutError:  # hung: its read transaction would also pin the WAL
                    log.error("Litestream said nothing for %g s; killing it", self.silence_seconds)
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    break
                if line is None:
                    break
                self._hear(line.decode("utf-8", "replace").rstrip())
            return await proc.wait()
        finally:
            self.status.running = False
            with contextlib.suppress(ProcessLookupError):  # ended by a failure here: not left without a reader
                if proc.returncode is None:
                    proc.kill()
            self.on_running(False)

    def _hear(self, line: str) -> None:
        """One line of Litestream's: noted for the status; warnings and errors passed on to the server's log."""
        if not line:
            return
        record = parse(line)
        if record is None:  # not one of its records: a crash's trace, say
            litestream_log.error("%s", line)
            return
        self.status.note(record)
        level = _LEVELS.get(str(record.get("level")))
        if level is not None:
            extra = " ".join(f"{key}={value}" for key, value in record.items()
                             if key not in ("time", "level", "msg"))
            litestream_log.log(level, "%s%s", record["msg"], f" ({extra})" if extra else "")

    async def _last_upload(self) -> None:
        """`litestream sync -wait`: whatever is in the WAL now is uploaded before Litestream stops."""
        assert self._socket is not None
        try:
            sync = await asyncio.create_subprocess_exec(
                self._program, "sync", "-wait", "-timeout", str(int(STOP_SECONDS)), "-socket", self._socket,
                self._db_path, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE)
            _, said = await asyncio.wait_for(sync.communicate(), STOP_SECONDS + 5)
        except (OSError, asyncio.TimeoutError) as exc:
            log.warning("the last upload to the replica did not finish (%s)", exc)
            return
        if sync.returncode != 0:
            log.warning("the last upload to the replica did not finish: %s", said.decode(errors="replace").strip())

    async def _end_child(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_SECONDS)
        except asyncio.TimeoutError:
            log.warning("Litestream did not stop within %g s; killing it", STOP_SECONDS)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

