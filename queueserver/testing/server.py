"""`QueueServer`: a real queueserver process that a test can crash, restart and time-travel.

It runs `python -m queueserver serve` as a child process on a free loopback port with the
manual test clock, on a real SQLite file, and talks to it only over HTTP, as the code under
test does. Nothing here imports the server's internals: what a test sees is what a client
sees. boto3 is imported only when a client is asked for, so that the pytest plugin costs
nothing to sessions that never use it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, TypeVar

from queueserver.extensions import BROWSE_ACTION, MAX_BROWSE
from queueserver.limits import DEFAULT_ACCOUNT, DEFAULT_REGION
from queueserver.testing.process import QueueServerError, ReadyProcess

T = TypeVar("T")


@dataclass(frozen=True)
class StartAttempt:
    """How a start that was expected to fail went: `returncode` None means it did not exit by itself (it
    printed READY, or hung) and was killed."""

    returncode: int | None
    stdout: str
    stderr: str


class QueueServer:
    """A queueserver child process bound to one database file.

    Use it as a context manager (`with QueueServer() as qs:`), or call `start()` and `close()`.
    Without `db_path` the database lives in a temporary folder that survives `stop()`, `kill()`
    and `crash()` (the point is to start again on the same file) and goes with `close()`.

    `region` and `account_id` are passed as `--region` and `--account-id` (None leaves them to the
    server's own settings: `extra_args`, the environment or a config file); `extra_args` go to
    `queueserver serve` after them. The server's stderr goes to `log_path` (default: beside the
    database). `run_under` is a command the server runs under (`["taskset", "-c", "0"]` pins it to
    core 0; `["valgrind", "--tool=callgrind"]` counts its instructions); `env` adds environment
    variables to the server's.
    """

    def __init__(self, db_path: str | os.PathLike[str] | None = None, *, region: str | None = DEFAULT_REGION,
                 account_id: str | None = DEFAULT_ACCOUNT, test_clock: bool = True,
                 extra_args: Sequence[str] = (), ready_timeout: float = 15.0,
                 log_path: str | os.PathLike[str] | None = None, run_under: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        self._own_dir = None if db_path is not None else Path(tempfile.mkdtemp(prefix="queueserver-"))
        self.db_path = Path(db_path) if db_path is not None else self._own_dir / "queueserver.db"  # type: ignore[operator]
        self.log_path = Path(log_path) if log_path is not None else self.db_path.with_name(self.db_path.name + ".log")
        self.region = region or DEFAULT_REGION
        self.account_id = account_id or DEFAULT_ACCOUNT
        self.test_clock = test_clock
        self._settings = [*(["--region", region] if region else []), *(["--account-id", account_id] if account_id else []),
                          *(["--test-clock"] if test_clock else []), *extra_args]
        self._ready_timeout = ready_timeout
        self._run_under = tuple(run_under)
        self._env = dict(env or {})
        self._process: ReadyProcess | None = None
        self._endpoint = ""
        self._regions: set[str] = {self.region}
        self._session: Any = None
        self.keep_files = False  # set by the pytest plugin when a failed test's database is kept

    # --- the process ---------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The URL the server printed on its READY line (it keeps its port across restarts)."""
        if not self._endpoint:
            raise QueueServerError("the server has not been started")
        return self._endpoint

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    @property
    def pid(self) -> int:
        """The server process's id (of the latest start)."""
        return self._started().pid

    @property
    def returncode(self) -> int | None:
        """The latest start's exit code; None while it runs."""
        return self._started().returncode

    @property
    def extra_stdout(self) -> list[str]:
        """Lines the latest start printed on stdout after READY (a server prints none)."""
        return self._started().extra_stdout

    def _started(self) -> ReadyProcess:
        if self._process is None:
            raise QueueServerError("the server has not been started")
        return self._process

    def _argv(self) -> list[str]:
        port = self._endpoint.rsplit(":", 1)[1] if self._endpoint else "0"
        return [sys.executable, "-m", "queueserver", "serve", "--host", "127.0.0.1", "--port", port,
                "--db", str(self.db_path), *self._settings]

    def start(self) -> QueueServer:
        """Start the server (on the port it had before, if it ran already) and wait until it answers."""
        if self.running:
            raise QueueServerError("the server is already running")
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._process = ReadyProcess.launch(self._argv(), self.log_path, ready_timeout=self._ready_timeout,
                                            env=self._env, run_under=self._run_under)
        self._endpoint = self._process.endpoint
        return self

    def try_start(self, timeout: float = 15.0) -> StartAttempt:
        """Start where the server should refuse to: wait until it exits, prints READY or `timeout` passes,
        kill it if it still runs, and say how it went (its exit code, stdout and stderr)."""
        if self.running:
            raise QueueServerError("the server is already running")
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        process = ReadyProcess.spawn(self._argv(), self.log_path, env=self._env, run_under=self._run_under)
        process.wait_for_exit_or_ready(timeout)
        returncode = process.returncode
        process.kill()
        return StartAttempt(returncode, "\n".join(process.stdout_lines), process.stderr_text())

    def stop(self, timeout: float = 15.0, *, check: bool = False) -> int:
        """SIGTERM, and wait for the clean shutdown; returns the exit code (0 when clean). With `check`,
        an exit code other than 0 raises QueueServerError with the log."""
        if self._process is None:
            return 0
        rc = self._process.stop(timeout)
        if check and rc != 0:
            raise QueueServerError(f"queueserver exited with {rc} on SIGTERM; its log:\n{self.stderr_text()}")
        return rc

    def kill(self) -> None:
        """SIGKILL: the process dies at once, as in a crash; nothing is flushed or closed."""
        if self._process is not None:
            self._process.kill()

    def send_signal(self, sig: int) -> None:
        """Send a signal to the running server (SIGHUP reloads its credentials)."""
        self._started().send_signal(sig)

    def restart(self, timeout: float = 15.0) -> QueueServer:
        """A clean stop, then a start on the same file and the same port."""
        self.stop(timeout, check=True)
        return self.start()

    def crash(self) -> QueueServer:
        """SIGKILL, then a start on the same file and the same port: what survives is what was acknowledged."""
        self.kill()
        return self.start()

    def close(self) -> None:
        """Stop the server and remove the temporary folder it made, unless `keep_files` is set (a
        `db_path` given is always left alone)."""
        try:
            if self.running:
                self.stop()
        finally:
            if self._own_dir is not None and not self.keep_files:
                shutil.rmtree(self._own_dir, ignore_errors=True)

    def __enter__(self) -> QueueServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def log_text(self) -> str:
        """What the server wrote to stderr, over all its starts."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stderr_text(self) -> str:
        """What the latest start wrote to stderr."""
        return self._process.stderr_text() if self._process is not None else ""

    # --- the test clock ------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        """The server's clock, in epoch milliseconds (the unit of SentTimestamp)."""
        return int(self._http("GET", "/_queueserver/clock")["now_ms"])

    @property
    def now(self) -> float:
        """The server's clock, in epoch seconds."""
        return self.now_ms / 1000

    def advance(self, seconds: float) -> float:
        """Move the server's clock forward: visibility, delays, retention and long polls follow it."""
        answer = self._http("POST", "/_queueserver/clock", {"advance_seconds": seconds})
        return int(answer["now_ms"]) / 1000

    # --- clients and helpers ---------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point boto3 and the SDKs (in this process or a child) here; not the AWS CLI v1,
        which ignores AWS_ENDPOINT_URL_SQS (it needs --endpoint-url)."""
        return {"AWS_ENDPOINT_URL_SQS": self.endpoint, "AWS_DEFAULT_REGION": self.region,
                "AWS_REGION": self.region, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}

    def client(self, region: str | None = None, **kwargs: Any) -> Any:
        """A boto3 SQS client bound to this server; keyword arguments go to `boto3.client`."""
        import boto3  # noqa: PLC0415 - only when a client is asked for

        if self._session is None:
            self._session = boto3.session.Session()
        region = region or self.region
        self._regions.add(region)
        options = {"endpoint_url": self.endpoint, "region_name": region, "aws_access_key_id": "test",
                   "aws_secret_access_key": "test", **kwargs}
        return self._session.client("sqs", **options)

    def create_queue(self, name: str, *, region: str | None = None, tags: dict[str, str] | None = None,
                     **attributes: Any) -> str:
        """CreateQueue with SQS attribute names as keywords; values may be ints, bools or dicts (JSON)."""
        wire = {key: _attribute_text(value) for key, value in attributes.items()}
        if name.endswith(".fifo"):
            wire.setdefault("FifoQueue", "true")
        answer = self.client(region).create_queue(QueueName=name, Attributes=wire, **({"tags": tags} if tags else {}))
        return str(answer["QueueUrl"])

    def queue_url(self, queue: str, region: str | None = None) -> str:
        """A queue URL from a URL or a name."""
        if "://" in queue:
            return queue
        return str(self.client(region).get_queue_url(QueueName=queue)["QueueUrl"])

    def messages(self, queue: str, region: str | None = None) -> list[dict[str, Any]]:
        """Every message of a queue in send order, with its `State`; nothing is received or hidden."""
        url = self.queue_url(queue, region)
        found: list[dict[str, Any]] = []
        token = None
        while True:
            page = self.call(BROWSE_ACTION, {"QueueUrl": url, "MaxNumberOfMessages": MAX_BROWSE,
                                                           **({"NextToken": token} if token else {})},
                             region=region)
            found.extend(page.get("Messages", []))
            token = page.get("NextToken")
            if not token:
                return found

    def counts(self, queue: str, region: str | None = None) -> dict[str, int]:
        """Exact counts by state (`visible`, `in_flight`, `delayed`), from one look at every message."""
        counts = {"visible": 0, "in_flight": 0, "delayed": 0}
        for message in self.messages(queue, region):
            counts[message["State"]] += 1
        return counts

    def delete_all_queues(self) -> int:
        """Delete every queue of this account in each region a client was made for; returns how many."""
        deleted = 0
        for region in sorted(self._regions):
            sqs = self.client(region)
            for url in sqs.list_queues(MaxResults=1000).get("QueueUrls", []):
                sqs.delete_queue(QueueUrl=url)
                deleted += 1
        return deleted

    def wait_for(self, predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.02) -> T:
        """Call `predicate` until it returns something true, and return that; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{getattr(predicate, '__name__', 'the condition')} still false after {timeout} s")
            time.sleep(interval)

    def call(self, action: str, members: dict[str, Any], region: str | None = None) -> dict[str, Any]:
        """Any action over the JSON protocol, including queueserver's extensions that boto3 does not know."""
        scope = f"Credential=test/20000101/{region or self.region}/sqs/aws4_request"
        headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}",
                   "Authorization": f"AWS4-HMAC-SHA256 {scope}, SignedHeaders=host, Signature=0"}
        return self._http("POST", "/", members, headers)

    def _http(self, method: str, path: str, body: dict[str, Any] | None = None,
              headers: dict[str, str] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.endpoint + path, data=data, method=method,
                                         headers=headers or {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return dict(json.loads(response.read() or b"{}"))
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")
            if path == "/_queueserver/clock" and error.code == 404:
                detail = "the test clock is off: make the QueueServer with test_clock=True"
            raise QueueServerError(f"{method} {path}: {error.code} {detail}") from None


def _attribute_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)
