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
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, TypeVar

from queueserver.errors import ClientError
from queueserver.extensions import BROWSE_ACTION, MAX_BROWSE
from queueserver.limits import DEFAULT_ACCOUNT, DEFAULT_REGION

T = TypeVar("T")

_READY = "READY "


class QueueServerError(ClientError, RuntimeError):
    """The server did not start, did not stop, or answered a helper call with an error.

    A ClientError: the harness sees the server from outside, as a process and HTTP."""


class QueueServer:
    """A queueserver child process bound to one database file.

    Use it as a context manager (`with QueueServer() as qs:`), or call `start()` and `close()`.
    Without `db_path` the database lives in a temporary folder that survives `stop()`, `kill()`
    and `crash()` (the point is to start again on the same file) and goes with `close()`.
    """

    def __init__(self, db_path: str | os.PathLike[str] | None = None, *, region: str = DEFAULT_REGION,
                 account_id: str = DEFAULT_ACCOUNT, test_clock: bool = True, extra_args: tuple[str, ...] = (),
                 ready_timeout: float = 15.0) -> None:
        self._own_dir = None if db_path is not None else Path(tempfile.mkdtemp(prefix="queueserver-"))
        self.db_path = Path(db_path) if db_path is not None else self._own_dir / "queueserver.db"  # type: ignore[operator]
        self.log_path = self.db_path.with_name(self.db_path.name + ".log")
        self.region = region
        self.account_id = account_id
        self.test_clock = test_clock
        self._extra_args = tuple(extra_args)
        self._ready_timeout = ready_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0
        self._regions: set[str] = {region}
        self._session: Any = None
        self.keep_files = False  # set by the pytest plugin when a failed test's database is kept

    # --- the process ---------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        if not self._port:
            raise QueueServerError("the server has not been started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> QueueServer:
        """Start the server (on the port it had before, if it ran already) and wait until it answers."""
        if self.running:
            raise QueueServerError("the server is already running")
        args = [sys.executable, "-m", "queueserver", "serve", "--host", "127.0.0.1", "--port", str(self._port),
                "--db", str(self.db_path), "--region", self.region, "--account-id", self.account_id,
                *(["--test-clock"] if self.test_clock else []), *self._extra_args]
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"--- {' '.join(args[1:])}\n".encode())
            log.flush()
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                          env=env)
        line = self._first_line(self._proc)
        if not line.startswith(_READY):
            self._reap(signal.SIGKILL)
            raise QueueServerError(f"queueserver did not start (first line {line!r});"
                                   f" its log:\n{self.log_text()}")
        self._port = int(line.rsplit(":", 1)[1])
        return self

    def _first_line(self, proc: subprocess.Popen[bytes]) -> str:
        """The READY line, read in a thread so that a server that hangs cannot hang the test."""
        assert proc.stdout is not None
        result: list[bytes] = []
        reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(self._ready_timeout)
        return result[0].decode("utf-8", "replace").strip() if result else ""

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, and wait for the clean shutdown; returns the exit code (0 when clean)."""
        return self._reap(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: the process dies at once, as in a crash; nothing is flushed or closed."""
        self._reap(signal.SIGKILL)

    def restart(self, timeout: float = 15.0) -> QueueServer:
        """A clean stop, then a start on the same file and the same port."""
        rc = self.stop(timeout)
        if rc != 0:
            raise QueueServerError(f"queueserver exited with {rc} on SIGTERM; its log:\n{self.log_text()}")
        return self.start()

    def crash(self) -> QueueServer:
        """SIGKILL, then a start on the same file and the same port: what survives is what was acknowledged."""
        self.kill()
        return self.start()

    def _reap(self, sig: int, timeout: float = 15.0) -> int:
        proc = self._proc
        if proc is None:
            return 0
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise QueueServerError(f"queueserver did not exit within {timeout} s; its log:\n{self.log_text()}")
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
        self._proc = None
        return rc

    def close(self) -> None:
        """Stop the server and remove the temporary folder it made, unless `keep_files` is set (a
        `db_path` given is always left alone)."""
        try:
            if self.running:
                self.stop()
        finally:
            self._proc = None
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
        """Environment variables that point boto3 and the AWS CLI (in this process or a child) here."""
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
