"""Spark deployments on one machine from the pip `pyspark` package: a standalone cluster, a Spark Connect server.

The pip package ships `bin/spark-class` and `bin/spark-submit` (not the sbin start scripts
of a Spark download), which is enough to run what a real deployment runs:
- `StandaloneCluster`: a `Master` and N `Worker` JVMs on loopback, each worker with its own
  cores, memory and work folder; a session on `spark://127.0.0.1:PORT` then gets one
  executor JVM per worker, each with its own Python workers;
- `ConnectServer`: a Spark Connect server (`SparkConnectServer`, in the foreground) whose
  clients hold no SparkContext: `SparkSession.builder.remote("sc://127.0.0.1:PORT")`;
- `session(master)`: a SparkSession for `local[N]`, `spark://...` or `sc://...`.

Every port is chosen by the JVM itself (port 0, read back from its log), so nothing clashes
with another cluster on the machine; the master's REST submission port (a fixed 6066) is
off. `stop()` ends every process the deployment started, executors and their Python
workers included, and returns the pids that would not die. The test suite (tests/support)
and scripts/spark_pipeline.py use it; run it alone to try a deployment by hand:

    python -m queueserver.spark.deployments cluster      # prints the master URL; Ctrl-C stops it all
    python -m queueserver.spark.deployments connect      # prints the sc:// URL
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from queueserver.errors import ClientError

# A client JIT and the serial collector: JVMs start faster and take less memory, which a small machine needs.
FAST_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
START_TIMEOUT_S = 240.0  # JVM start-up is slow on a loaded machine: wait long, never a fixed sleep
STOP_TIMEOUT_S = 30.0
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
PR_SET_PDEATHSIG = 1  # prctl(2)
# Settings of every session made here: two shuffle partitions, UTC.
SQL_CONF = {"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"}
# A new Python worker (pyspark, pandas, pyarrow, boto3) may take over Spark's 15 s to connect back on a busy machine.
PYTHON_WORKER_CONF = {"spark.python.authenticate.socketTimeout": "180s"}


class SparkLaunchError(ClientError, RuntimeError):
    """A master, worker or Connect server did not start (its log's tail says why)."""


def spark_home() -> Path:
    """The pip package's folder: it holds bin/, jars/ and python/ like a Spark download."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Spark's Python daemon and executors included), from /proc."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def identity(pid: int) -> tuple[int, int] | None:
    """(pid, start time) of a live process, None if there is none (a zombie only waits to be reaped).

    Why not the pid alone: with pid_max at 32768 and a busy machine, a pid that ended is soon
    another process's, and a pid remembered from before must not be signalled then.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else (pid, int(fields[19]))  # fields[19]: stat's 22nd, the start time


def running(process: tuple[int, int]) -> bool:
    """Whether the process `identity()` described is still the one running under its pid."""
    return identity(process[0]) == process


def alive(pid: int) -> bool:
    """Whether some live process has `pid` now (for a pid just read from /proc, not one remembered)."""
    return identity(pid) is not None


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _die_with_parent() -> None:
    """In the child, before exec: the kernel sends it SIGTERM when the thread that started it ends (Linux)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class _Jvm:
    """One JVM started through bin/spark-class or bin/spark-submit (both exec java: the pid is the JVM's).

    Its own session, so that a Ctrl-C meant for the caller does not hit it before stop() stops
    everything in order; and it dies with its starter, so that a killed caller leaves no JVM behind.
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name, self.log_path = name, log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def check_alive(self) -> None:
        """SparkLaunchError with the log's tail if the JVM has exited."""
        if self.proc.poll() is not None:
            raise SparkLaunchError(f"the {self.name} exited with {self.proc.returncode}:\n{self.log()[-3000:]}")

    def wait_for_log(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first match of `pattern` in the JVM's log; fails if the JVM exits or the time runs out."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.log())
            if match:
                return match
            self.check_alive()
            if time.monotonic() > deadline:
                raise SparkLaunchError(f"the {self.name} did not log {pattern!r} in {timeout:.0f} s:\n"
                                       f"{self.log()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; the log file is closed either way."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        self._log.close()


class _Deployment:
    """What the cluster and the Connect server share: a folder, an environment, and a clean stop."""

    def __init__(self, base_dir: Path, python: str, env: dict[str, str] | None) -> None:
        self.base_dir = base_dir
        self.base_dir.mkdir(parents=True, exist_ok=True)
        conf_dir = base_dir / "conf"
        conf_dir.mkdir(exist_ok=True)
        # Our own conf folder, so that a user's SPARK_CONF_DIR or spark-defaults.conf does not leak in.
        self.properties = conf_dir / "spark-defaults.conf"
        self.properties.write_text("spark.master.rest.enabled false\nspark.ui.enabled false\n")
        local_dir = base_dir / "local"
        local_dir.mkdir(exist_ok=True)
        self.python = python
        self.env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_CONF_DIR": str(conf_dir),
                    "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(local_dir), "PYSPARK_PYTHON": python,
                    **(env or {})}
        for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS"):
            self.env.pop(name, None)  # a client's settings, which would turn the JVMs into something else
        self.jvms: list[_Jvm] = []

    def _start(self, name: str, argv: list[str]) -> _Jvm:
        jvm = _Jvm(name, argv, self.env, self.base_dir / f"{name.replace(' ', '-')}.log")
        self.jvms.append(jvm)
        return jvm

    def stop(self) -> list[int]:
        """Stop every JVM (the last started first); the pids still alive afterwards (none, normally)."""
        started = [process for jvm in self.jvms if jvm.proc.poll() is None
                   for pid in (jvm.proc.pid, *descendants(jvm.proc.pid)) if (process := identity(pid))]
        for jvm in reversed(self.jvms):
            jvm.stop()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while any(running(process) for process in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        strays = [process for process in started if running(process)]
        for pid, _ in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return [pid for pid, _ in strays]


class StandaloneCluster(_Deployment):
    """A standalone master and `workers` workers on loopback (see the module docstring)."""

    def __init__(self, base_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 python: str = sys.executable, env: dict[str, str] | None = None) -> None:
        # The master's and workers' own heap (not the executors'); spark-submit would apply it to a Connect server too.
        daemon = {"SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": FAST_JVM}
        super().__init__(base_dir, python, {**daemon, **(env or {})})
        self.workers, self.cores, self.memory = workers, cores, memory
        self.master_url = ""
        self.ui_url = ""

    def start(self, timeout: float = START_TIMEOUT_S) -> StandaloneCluster:
        deadline = time.monotonic() + timeout
        spark_class = str(spark_home() / "bin" / "spark-class")
        master = self._start("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                        "--port", "0", "--webui-port", "0", "--properties-file", str(self.properties)])
        self.master_url = master.wait_for_log(r"Starting Spark master at (spark://\S+)", timeout).group(1)
        ui_port = master.wait_for_log(r"'MasterUI' on port (\d+)", deadline - time.monotonic()).group(1)
        self.ui_url = f"http://127.0.0.1:{ui_port}"
        for i in range(self.workers):
            work_dir = self.base_dir / f"worker-{i}"
            work_dir.mkdir(exist_ok=True)
            self._start(f"worker {i}", [spark_class, "org.apache.spark.deploy.worker.Worker", self.master_url,
                                        "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                                        "--cores", str(self.cores), "--memory", self.memory,
                                        "--work-dir", str(work_dir), "--properties-file", str(self.properties)])
        while (registered := self.alive_workers()) < self.workers:
            for jvm in self.jvms:
                jvm.check_alive()
            if time.monotonic() > deadline:
                raise SparkLaunchError(f"{registered} of {self.workers} workers registered with the master in "
                                       f"{timeout:.0f} s:\n{self.jvms[-1].log()[-3000:]}")
            time.sleep(0.3)
        return self

    def status(self) -> dict[str, Any]:
        """The master's own view (its web UI's /json/): workers, cores, applications."""
        with urllib.request.urlopen(self.ui_url + "/json/", timeout=10) as response:
            return dict(json.loads(response.read()))

    def alive_workers(self) -> int:
        try:
            return int(self.status().get("aliveworkers", 0))
        except OSError:
            return 0

    @property
    def worker_pids(self) -> list[int]:
        return [jvm.proc.pid for jvm in self.jvms[1:]]

    def executor_pids(self, worker: int) -> list[int]:
        """The executor JVMs the `worker`th worker runs now (CoarseGrainedExecutorBackend in its process tree)."""
        return [pid for pid in descendants(self.worker_pids[worker])
                if EXECUTOR_CLASS in command_line(pid) and alive(pid)]

    def session_conf(self) -> dict[str, str]:
        """What a session on this cluster needs: where the driver listens, executor size, the executors' Python."""
        return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "512m", "spark.executor.cores": str(self.cores),
                "spark.cores.max": str(self.cores * self.workers), "spark.default.parallelism": str(self.workers),
                "spark.executor.extraJavaOptions": FAST_JVM, "spark.pyspark.python": self.python}


class ConnectServer(_Deployment):
    """A Spark Connect server on loopback, its Spark running on `master` (local[2] by default)."""

    def __init__(self, base_dir: Path, master: str = "local[2]", python: str = sys.executable,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(base_dir, python, env)
        self.master = master
        self.url = ""

    def start(self, timeout: float = START_TIMEOUT_S) -> ConnectServer:
        conf = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": "0",
                "spark.ui.enabled": "false", "spark.driver.memory": "1g", "spark.driver.extraJavaOptions": FAST_JVM,
                "spark.local.dir": str(self.base_dir / "local"), "spark.pyspark.python": self.python,
                "spark.sql.streaming.stopTimeout": "10s", **PYTHON_WORKER_CONF, **SQL_CONF}
        argv = [str(spark_home() / "bin" / "spark-submit"), "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", self.master,
                "--properties-file", str(self.properties)]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        server = self._start("connect server", [*argv, "spark-internal"])
        port = server.wait_for_log(r"Spark Connect server started at: \S*?:(\d+)", timeout).group(1)
        self.url = f"sc://127.0.0.1:{port}"
        return self


def session(master: str, app_name: str = "queueserver", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession on `master`: local[N], spark://HOST:PORT (standalone) or sc://HOST:PORT (Connect).

    A classic session's executors run Python workers with PYSPARK_PYTHON (this interpreter
    unless set), which must be able to import queueserver. A Connect client only sets SQL
    settings: everything else belongs to the server.
    """
    from pyspark.sql import SparkSession

    if master.startswith("sc://"):
        builder = SparkSession.builder.remote(master)
        for key, value in {**SQL_CONF, **(conf or {})}.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "1g",
                "spark.driver.extraJavaOptions": FAST_JVM, "spark.sql.streaming.stopTimeout": "10s",
                "spark.pyspark.python": os.environ["PYSPARK_PYTHON"], **PYTHON_WORKER_CONF, **SQL_CONF, **(conf or {})}
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["cluster", "connect"])
    parser.add_argument("--workers", type=int, default=2, help="cluster: workers (one core, 1 GB each)")
    parser.add_argument("--master", default="local[2]", help="connect: where the Connect server runs its Spark")
    parser.add_argument("--dir", help="logs and work folders (a temporary folder by default)")
    args = parser.parse_args(argv)
    base = Path(args.dir or tempfile.mkdtemp(prefix=f"queueserver-spark-{args.what}-"))
    deployment: StandaloneCluster | ConnectServer
    if args.what == "cluster":
        deployment = StandaloneCluster(base, workers=args.workers)
    else:
        deployment = ConnectServer(base, master=args.master)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        deployment.start()
        url = deployment.master_url if isinstance(deployment, StandaloneCluster) else deployment.url
        print(f"{url}  (logs in {base}; Ctrl-C stops it)", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        strays = deployment.stop()
        if strays:
            print(f"killed processes that did not stop: {strays}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
