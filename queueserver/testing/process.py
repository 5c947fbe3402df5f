"""`ReadyProcess`: a child process that serves HTTP and says where with a first stdout line `READY <url>`.

The one launcher under `QueueServer` (and under the project's benchmark servers, which print the
same line): it starts the command, optionally under another (`taskset -c 0`, valgrind), sends its
stderr to a file, reads stdout in a thread (so that a server that hangs cannot hang the caller, and
so that any line after READY is kept: a server should print none), and stops it with a signal.
"""

from __future__ import annotations

import os
import queue as queue_module
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from queueserver.errors import ClientError

READY = re.compile(r"^READY (https?://[^\s]+)$")
_CLOSE_WAIT_S = 5.0  # how long to wait for the stdout reader once the process has exited


class QueueServerError(ClientError, RuntimeError):
    """The server did not start, did not stop, or answered a helper call with an error.

    A ClientError: the harness sees the server from outside, as a process and HTTP."""


class ReadyProcess:
    """A started child process whose first stdout line was `READY <url>`; `launch` makes one."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, log_offset: int) -> None:
        self._proc = proc
        self.log_path = log_path
        self._log_offset = log_offset  # where this process's stderr begins in the log
        self.endpoint = ""
        self.stdout_lines: list[str] = []
        self._lines: queue_module.Queue[str | None] = queue_module.Queue()
        self._reader = threading.Thread(target=self._pump, daemon=True, name=f"stdout-{proc.pid}")
        self._reader.start()

    @classmethod
    def launch(cls, argv: Sequence[str], log_path: str | os.PathLike[str], *, ready_timeout: float = 15.0,
               env: Mapping[str, str] | None = None, run_under: Sequence[str] = (),
               cwd: str | os.PathLike[str] | None = None, new_session: bool = False) -> ReadyProcess:
        """Start `run_under + argv` with `env` over this process's environment, its stderr appended to
        `log_path`, and wait for READY; raises QueueServerError (the process killed) if it does not come.
        `cwd` is its working folder; `new_session` keeps a Ctrl-C of the caller's terminal from reaching it."""
        process = cls.spawn(argv, log_path, env=env, run_under=run_under, cwd=cwd, new_session=new_session)
        first = process._next_line(ready_timeout)
        match = READY.match(first or "")
        if match is None:
            process.kill()
            raise QueueServerError(f"queueserver did not start (first line {first!r}, exit code "
                                   f"{process.returncode}): {' '.join(argv)}\nits log:\n{process.stderr_text()}")
        process.endpoint = match.group(1)
        return process

    @classmethod
    def spawn(cls, argv: Sequence[str], log_path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None,
              run_under: Sequence[str] = (), cwd: str | os.PathLike[str] | None = None,
              new_session: bool = False) -> ReadyProcess:
        """Start the command and return at once (`launch` waits for READY)."""
        log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [*run_under, *argv]
        with open(log_path, "ab") as log:
            log.write(f"--- {' '.join(argv[1:])}\n".encode())  # the server's arguments, not the interpreter's path
            log.flush()
            offset = log.tell()
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, cwd=cwd,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                                    start_new_session=new_session)
        return cls(proc, log_path, offset)

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        try:
            for raw in self._proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                self.stdout_lines.append(line)
                self._lines.put(line)
        except ValueError:  # the pipe was closed under us
            pass
        self._lines.put(None)

    def _next_line(self, timeout: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue_module.Empty:
            return None

    # --- what a caller reads ---------------------------------------------------------

    @property
    def pid(self) -> int:
        """The server's process id (taskset and valgrind run the command in their own process)."""
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit code, or None while it runs."""
        return self._proc.poll()

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    @property
    def extra_stdout(self) -> list[str]:
        """Lines printed on stdout after READY (a server prints none)."""
        return self.stdout_lines[1:]

    def stderr_text(self) -> str:
        """What this process wrote to stderr (the log's earlier starts left out)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # --- ending it -------------------------------------------------------------------

    def send_signal(self, sig: int) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(sig)

    def wait_for_exit_or_ready(self, timeout: float) -> None:
        """Wait until the process exits, prints READY, or `timeout` passes (then it may still run)."""
        deadline = time.monotonic() + timeout
        while True:
            line = self._next_line(max(0.0, deadline - time.monotonic()))
            if line is None or READY.match(line):  # stdout ended, time is up, or it started
                break
        if line is None and self._proc.poll() is None:
            try:
                self._proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit code. One that does not exit in time is killed and
        QueueServerError raised with its log."""
        self.send_signal(signal.SIGTERM)
        try:
            rc = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise QueueServerError(f"queueserver did not exit within {timeout:g} s of SIGTERM; its log:\n"
                                   f"{self.stderr_text()}") from None
        self._close()
        return rc

    def kill(self) -> int:
        """SIGKILL (nothing flushed or closed, as in a crash) and wait; returns the exit code."""
        self.send_signal(signal.SIGKILL)
        rc = self._proc.wait()
        self._close()
        return rc

    def _close(self) -> None:
        """Close stdout once its reader is done (a child of the server may hold the pipe a moment longer)."""
        self._reader.join(_CLOSE_WAIT_S)
        if not self._reader.is_alive() and self._proc.stdout is not None:
            self._proc.stdout.close()
