"""The benchmarks' server processes: started through queueserver.testing, pinned, read through /proc.

Every server (queueserver, of this checkout or of a revision's snapshot; the ceiling and reference
servers of the load benchmark) prints `READY <url>` first, so queueserver.testing's `ReadyProcess`
starts them all. Where there are two cores the server runs on core 0 (taskset) and the client on
core 1; its CPU seconds, threads and memory are read from /proc.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from queueserver.testing.process import QueueServerError, ReadyProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
CLK_TCK = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT_S = 60.0


def stat_cpu_seconds(stat_path: str) -> float:
    """utime + stime from /proc/PID/stat (the process, all threads) or /proc/PID/task/TID/stat."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pinned() -> list[str]:
    """`taskset -c 0` where there are two cores or more (the client takes core 1), else nothing."""
    return ["taskset", "-c", "0"] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []


class Proc:
    """A benchmark's server, started; `name` says which in the figures."""

    def __init__(self, process: ReadyProcess, name: str) -> None:
        self.process = process
        self.name = name

    @property
    def pid(self) -> int:
        return self.process.pid  # taskset and valgrind exec the command: the same pid

    @property
    def endpoint(self) -> str:
        return self.process.endpoint

    @property
    def url(self) -> str:
        return self.process.endpoint

    @property
    def host(self) -> str:
        return self.url.split("//", 1)[1].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def stderr_text(self) -> str:
        return self.process.stderr_text()

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
        """SIGTERM and wait (a benchmark's server that hangs is killed, not reported: -9)."""
        try:
            return self.process.stop(timeout)
        except QueueServerError:
            return -9

    def kill(self) -> None:
        self.process.kill()


def start_proc(argv: list[str], log_path: Path, name: str, source: Path | None = None,
               run_under: list[str] | None = None, ready_timeout: float = READY_TIMEOUT_S) -> Proc:
    """A benchmark's server process, pinned (or under `run_under`), once it printed READY.

    `source` is a revision's snapshot to import queueserver from instead of this checkout (first on
    the path, and the working folder, which `python -m` puts before the path)."""
    root = source or REPO_ROOT
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}
    process = ReadyProcess.launch(argv, log_path, ready_timeout=ready_timeout, env=env, cwd=root,
                                  run_under=pinned() if run_under is None else run_under, new_session=True)
    return Proc(process, name)


def start_queueserver(python: str, db_path: Path, log_path: Path, source: Path | None = None,
                      *extra_args: str) -> Proc:
    # The idle-polls scenario holds thousands of connections, beyond the default --max-connections.
    guarded = ((source or REPO_ROOT) / "queueserver" / "http_guard.py").exists()
    limits = ["--max-connections", "20000"] if guarded else []
    return start_proc([python, "-m", "queueserver", "serve", "--port", "0", "--db", str(db_path),
                       "--log-level", "warning", *limits, *extra_args], log_path, "queueserver", source)


def start_ceiling(python: str, log_path: Path, source: Path | None = None) -> Proc:
    """The server's own HTTP stack alone (of `source`, a revision's snapshot, if given): bench/ceiling_server.py."""
    return start_proc([python, str(Path(__file__).with_name("ceiling_server.py"))], log_path, "ceiling server",
                      source)


REFERENCE_SERVER = Path(__file__).with_name("reference_server.py")


def start_reference(python: str, db_path: Path, log_path: Path) -> Proc:
    """The minimal server of this design, measured in the same run: bench/reference_server.py."""
    return start_proc([python, str(REFERENCE_SERVER), str(db_path)], log_path, "reference server")


def export_revision(rev: str, dest: Path) -> tuple[Path, str]:
    """A snapshot of the server at a git revision (the working tree may be mid-change), laid
    out so that `python -m queueserver` runs from it: the migrations go inside the package,
    where the editable install maps them."""
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", rev], check=True,
                            capture_output=True, text=True).stdout.strip()
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", "--format=tar", commit],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    shutil.copytree(dest / "migrations", dest / "queueserver" / "migrations")
    return dest, commit


def working_tree_state() -> str:
    """What runs without a revision's snapshot: this checkout's commit, and whether its server differs from it."""
    try:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no",
                                "queueserver", "migrations"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "working tree (not a git checkout)"
    return f"working tree at {commit}" + (" with uncommitted server changes" if dirty.strip() else "")
