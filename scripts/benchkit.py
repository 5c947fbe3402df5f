"""The benchmarks' server processes and their boto3 client.

Start a server on a free port and wait for its READY line (pinned to a core with taskset, and
read through /proc for its CPU and memory), and build boto3 clients that never retry. The
benchmarks' raw HTTP client is scripts/benchclient.py.
"""

from __future__ import annotations

import contextlib
import os
import queue as queue_module
import re
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError

REPO_ROOT = Path(__file__).resolve().parents[1]
ACCOUNT = "000000000000"
READY_RE = re.compile(r"^READY (https?://127\.0\.0\.1:(\d+))$")


# --- the server process ------------------------------------------------------------


class ServerError(RuntimeError):
    pass


class Server:
    """A `python -m queueserver serve` child process (stdout: the READY line)."""

    def __init__(self, proc: subprocess.Popen[bytes], stderr_path: Path, stderr_file: IO[bytes]):
        self.proc = proc
        self.stderr_path = stderr_path
        self._stderr_file = stderr_file
        self.endpoint = ""
        self.stdout_lines: list[str] = []

    @property
    def extra_stdout(self) -> list[str]:
        """Lines printed after READY (there should be none)."""
        return self.stdout_lines[1:]

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return "<no stderr>"

    def _close(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if not self._stderr_file.closed:
            self._stderr_file.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=15)
        self._close()

    def stop(self, timeout: float = 15) -> int:
        """SIGTERM and wait; returns the exit code (kills and raises if it does not exit)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ServerError(f"queueserver did not exit within {timeout}s of SIGTERM\n{self.stderr_text()}")
        self._close()
        return rc

    def ensure_dead(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()


ServerT = TypeVar("ServerT", bound=Server)


def _env(source: Path = REPO_ROOT) -> dict[str, str]:
    """The environment of a child: `source` (a revision's snapshot, or this checkout) first on its path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def launch(argv: list[str], stderr_path: Path, *, ready_timeout: float = 15, pin: bool = False,
           source: Path | None = None,
           server_class: type[ServerT] = Server) -> ServerT:  # type: ignore[assignment] - the default is a ServerT
    """Run a server command and wait for its first stdout line, `READY http://127.0.0.1:PORT`;
    raises ServerError (the process dead) if it does not come.

    `pin` runs it on core 0 with taskset (the benchmarks' client has core 1); `source` is a
    revision's snapshot to import queueserver from instead of this checkout.
    """
    taskset = ["taskset", "-c", "0"] if pin and shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []
    stderr_file = open(stderr_path, "wb")  # noqa: SIM115 - closed by Server
    proc = subprocess.Popen([*taskset, *argv], cwd=source or REPO_ROOT, env=_env(source or REPO_ROOT),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr_file,
                            start_new_session=pin)  # a benchmark's Ctrl-C must not reach its server mid-run
    server = server_class(proc, stderr_path, stderr_file)
    lines: queue_module.Queue[str | None] = queue_module.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                server.stdout_lines.append(line)
                lines.put(line)
        except ValueError:  # closed under us by kill()
            pass
        lines.put(None)

    threading.Thread(target=pump, daemon=True, name=f"qs-stdout-{proc.pid}").start()
    try:
        first = lines.get(timeout=ready_timeout)
    except queue_module.Empty:
        first = None
    match = READY_RE.match(first) if first else None
    if match is None:
        server.ensure_dead()
        raise ServerError(f"the server did not print READY (first line {first!r}, rc={proc.returncode})\n"
                          f"{' '.join(argv)}\n--- stderr ---\n{server.stderr_text()}")
    server.endpoint = match.group(1)
    return server


def start_server(db_path: str | os.PathLike[str], *extra_args: str, ready_timeout: float = 15,
                 log_dir: str | os.PathLike[str] | None = None, server_class: type[Server] = Server) -> Server:
    """Start `queueserver serve --port 0` and wait for READY; raises ServerError if it does not come.

    Its stderr goes to a file in `log_dir` (default: beside the database; give another
    folder when the database's filesystem is about to fill up or turn read-only).
    """
    db_path = Path(db_path)
    folder = Path(log_dir) if log_dir is not None else db_path.parent
    cmd = [sys.executable, "-m", "queueserver", "serve", "--host", "127.0.0.1", "--port", "0",
           "--db", str(db_path), *extra_args]
    return launch(cmd, folder / f"{db_path.name}.{uuid.uuid4().hex[:8]}.stderr.log", ready_timeout=ready_timeout,
                  server_class=server_class)


@contextlib.contextmanager
def running(db_path: str | os.PathLike[str], *extra_args: str) -> Iterator[Server]:
    """A server for the `with` block, which must stop cleanly (exit code 0) at its end."""
    proc = start_server(db_path, *extra_args)
    try:
        yield proc
    finally:
        try:
            assert proc.stop() == 0, proc.stderr_text()
        finally:
            proc.ensure_dead()


_SESSION = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test",
                                 region_name="us-east-1")
_CLIENT_LOCK = threading.Lock()  # building clients from one session is not thread-safe


class ResponseCutShort(BotoCoreError):
    fmt = "The response ended after {received} of its {expected} bytes: the server died while sending it"


def _refuse_cut_responses(http_response: Any, **_: Any) -> None:
    """botocore parses a body cut short by the server's death as an empty success ({}):
    a DeleteMessageBatch answered so would look acknowledged with nothing deleted."""
    expected = http_response.headers.get("content-length")
    received = len(http_response.content)
    if expected is not None and int(expected) != received:
        raise ResponseCutShort(received=received, expected=expected)


def make_client(endpoint: str, read_timeout: float = 5, connect_timeout: float = 2) -> Any:
    """A client that makes exactly one attempt per call and never takes a cut response for an answer.

    botocore's `max_attempts` counts *retries* (max_attempts=1 is two attempts); only
    `total_max_attempts` counts the first one.
    """
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=connect_timeout,
                    read_timeout=read_timeout, max_pool_connections=4)
    with _CLIENT_LOCK:
        client = _SESSION.client("sqs", region_name="us-east-1", endpoint_url=endpoint,
                                 aws_access_key_id="test", aws_secret_access_key="test", config=config)
    client.meta.events.register("after-call.sqs", _refuse_cut_responses)
    return client


# --- the benchmarks' server: pinned to core 0, read through /proc --------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def stat_cpu_seconds(stat_path: str) -> float:
    """utime + stime from /proc/PID/stat (the process, all threads) or /proc/PID/task/TID/stat."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Proc(Server):
    """A benchmark's server: pinned to core 0, read through /proc (its CPU seconds, threads, memory)."""

    name = "server"

    @property
    def pid(self) -> int:
        return self.proc.pid  # taskset execs the command: same pid

    @property
    def url(self) -> str:
        return self.endpoint

    @property
    def host(self) -> str:
        return self.endpoint.split("//", 1)[1].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def cpu_seconds(self) -> float:
        return stat_cpu_seconds(f"/proc/{self.pid}/stat")

    def thread_cpu(self) -> dict[str, float]:
        """CPU seconds of the main (event loop) thread and of all other threads (SQLite, executors)."""
        main = other = 0.0
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            try:
                seconds = stat_cpu_seconds(f"/proc/{self.pid}/task/{tid}/stat")
            except OSError:
                continue
            if int(tid) == self.pid:
                main += seconds
            else:
                other += seconds
        return {"loop": main, "other": other}

    def memory_mb(self) -> dict[str, float]:
        values = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    values[line.split(":")[0]] = int(line.split()[1]) / 1024
        return {"rss_mb": values.get("VmRSS", 0.0), "peak_rss_mb": values.get("VmHWM", 0.0)}

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait (a benchmark's server that hangs is killed, not reported)."""
        try:
            return super().stop(timeout)
        except ServerError:
            return -9


def start_proc(argv: list[str], log_path: Path, name: str, source: Path | None = None) -> Proc:
    """A benchmark's server process, pinned to core 0, once it printed READY (60 s at most)."""
    proc = launch(argv, log_path, ready_timeout=60, pin=True, source=source, server_class=Proc)
    proc.name = name
    return proc


def start_queueserver(python: str, db_path: Path, log_path: Path, source: Path | None = None,
                      *extra_args: str) -> Proc:
    # The idle-polls scenario holds thousands of connections, beyond the default --max-connections.
    guarded = ((source or REPO_ROOT) / "queueserver" / "http_guard.py").exists()
    limits = ["--max-connections", "20000"] if guarded else []
    return start_proc([python, "-m", "queueserver", "serve", "--port", "0", "--db", str(db_path),
                       "--log-level", "warning", *limits, *extra_args], log_path, "queueserver", source)


def start_ceiling(python: str, log_path: Path, source: Path | None = None) -> Proc:
    """scripts/bench_ceiling.py: the server's own HTTP stack (of `source`, a revision's snapshot, if given)."""
    return start_proc([python, str(REPO_ROOT / "scripts" / "bench_ceiling.py")], log_path, "ceiling server", source)


def start_reference(python: str, db_path: Path, log_path: Path) -> Proc:
    """scripts/bench_reference.py: the minimal server of this design, measured in the same run."""
    return start_proc([python, str(REPO_ROOT / "scripts" / "bench_reference.py"), str(db_path)], log_path,
                      "reference server")
