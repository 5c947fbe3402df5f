"""The reference for scripts/bench load: a minimal SQS server of queueserver's design, measured in
the same run as queueserver, on the same machine, instead of figures quoted from elsewhere.

    python scripts/bench/reference_server.py DB_PATH      # prints "READY http://127.0.0.1:PORT"

The reference's design: starlette on uvicorn (uvloop, httptools), one SQLite writer
thread that runs whatever arrived meanwhile as one grouped transaction, synchronous=FULL (every
COMMIT syncs the log before any of its answers go out), and long polls woken by the sends'
commits; reads (counts, browse) on two read-only connections of their own, as queueserver does.
Only what the benchmark calls, with none of SQS's checks: CreateQueue, DeleteQueue, PurgeQueue,
GetQueueAttributes (the three counts), SendMessage(Batch), ReceiveMessage (with WaitTimeSeconds
and VisibilityTimeout), DeleteMessage(Batch) and QueueserverBrowseMessages (a keyset page in send
order: MessageId, MD5OfBody, Body), over the JSON protocol.
So it is what this design costs with nothing on top: queueserver's distance to it is the price
of its checks and features.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import queue
import socket
import sqlite3
import sys
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

SCHEMA = """
CREATE TABLE IF NOT EXISTS queues (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL);
CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, queue_id INTEGER NOT NULL, message_id TEXT NOT NULL,
    body TEXT NOT NULL, md5 TEXT NOT NULL, visible_at REAL NOT NULL, receipt TEXT, receive_count INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS messages_by_queue ON messages (queue_id, visible_at, id);
"""

# The next visible messages in index order: a seek, whatever the depth. (ORDER BY id alone sorted
# every visible message of the queue in a temporary B-tree on each receive.)
CLAIM = """
UPDATE messages SET visible_at = ?, receipt = hex(randomblob(8)), receive_count = receive_count + 1
WHERE id IN (SELECT id FROM messages WHERE queue_id = ? AND visible_at <= ? ORDER BY visible_at, id LIMIT ?)
RETURNING id, message_id, body, md5, receipt
"""

# Both counts in the index alone, in one snapshot.
COUNTS = ("SELECT (SELECT count(*) FROM messages WHERE queue_id = ?1 AND visible_at <= ?2),"
          " (SELECT count(*) FROM messages WHERE queue_id = ?1 AND visible_at > ?2)")

# Keyset page along the rowid (named: the planner would sort the whole queue); no extra index to
# write, so rows of other queues in the range are read and skipped.
BROWSE = "SELECT id, message_id, body, md5 FROM messages NOT INDEXED WHERE id > ? AND queue_id = ? ORDER BY id LIMIT ?"


class Writer:
    """One connection on one thread; everything queued meanwhile runs as one transaction."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.executescript(SCHEMA)
        self.inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._serve, daemon=True).start()

    async def run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.inbox.put((fn, future, loop))
        return await future

    def _serve(self) -> None:
        while True:
            group = [self.inbox.get()]
            while True:
                try:
                    group.append(self.inbox.get_nowait())
                except queue.Empty:
                    break
            outcomes = []
            self.conn.execute("BEGIN IMMEDIATE")
            for fn, _, _ in group:
                self.conn.execute("SAVEPOINT op")
                try:
                    result = fn(self.conn)
                    if isinstance(result, sqlite3.Cursor):  # finalized on this thread, not the loop's
                        result = None
                    outcomes.append((True, result))
                    self.conn.execute("RELEASE op")
                except Exception as exc:  # noqa: BLE001 - answered to its request
                    self.conn.execute("ROLLBACK TO op")
                    self.conn.execute("RELEASE op")
                    outcomes.append((False, exc))
            self.conn.execute("COMMIT")
            for (_, future, loop), (ok, value) in zip(group, outcomes):
                loop.call_soon_threadsafe(_resolve, future, ok, value)


def _resolve(future: asyncio.Future, ok: bool, value: Any) -> None:
    if not future.done():
        future.set_result(value) if ok else future.set_exception(value)


class Readers:
    """Read-only connections on threads of their own: under WAL a read never waits for the writer."""

    def __init__(self, path: str, count: int = 2) -> None:
        self.path = path
        self.pool = ThreadPoolExecutor(count)
        self.local = threading.local()

    async def run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA query_only=ON")
        return fn(conn)


class Reference:
    def __init__(self, path: str) -> None:
        self.db = Writer(path)
        self.readers = Readers(path)
        self.queues: dict[str, int] = {}
        self.waiters: defaultdict[int, set[asyncio.Future]] = defaultdict(set)

    def queue_id(self, payload: dict[str, Any]) -> int:
        return self.queues[payload["QueueUrl"].rsplit("/", 1)[1]]

    def wake(self, queue_id: int) -> None:
        for waiter in self.waiters.pop(queue_id, ()):
            if not waiter.done():
                waiter.set_result(None)

    async def CreateQueue(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        name = payload["QueueName"]

        def create(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT OR IGNORE INTO queues (name) VALUES (?)", (name,))
            return conn.execute("SELECT id FROM queues WHERE name = ?", (name,)).fetchone()[0]

        self.queues[name] = await self.db.run(create)
        return {"QueueUrl": f"http://{host}/000000000000/{name}"}

    async def DeleteQueue(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        await self.PurgeQueue(payload, host)
        self.queues.pop(payload["QueueUrl"].rsplit("/", 1)[1], None)
        return {}

    async def PurgeQueue(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        queue_id = self.queue_id(payload)
        await self.db.run(lambda conn: conn.execute("DELETE FROM messages WHERE queue_id = ?", (queue_id,)))
        return {}

    async def GetQueueAttributes(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        queue_id, now = self.queue_id(payload), time.time()
        visible, hidden = await self.readers.run(lambda conn: conn.execute(COUNTS, (queue_id, now)).fetchone())
        return {"Attributes": {"ApproximateNumberOfMessages": str(visible),
                               "ApproximateNumberOfMessagesNotVisible": str(hidden),
                               "ApproximateNumberOfMessagesDelayed": "0"}}

    async def _send(self, queue_id: int, bodies: list[str]) -> list[tuple[str, str]]:
        now = time.time()
        rows = [(queue_id, str(uuid.uuid4()), body, hashlib.md5(body.encode()).hexdigest(), now) for body in bodies]
        await self.db.run(lambda conn: conn.executemany(
            "INSERT INTO messages (queue_id, message_id, body, md5, visible_at, receive_count)"
            " VALUES (?, ?, ?, ?, ?, 0)", rows))
        self.wake(queue_id)
        return [(row[1], row[3]) for row in rows]

    async def SendMessage(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        [(message_id, md5)] = await self._send(self.queue_id(payload), [payload["MessageBody"]])
        return {"MessageId": message_id, "MD5OfMessageBody": md5}

    async def SendMessageBatch(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        entries = payload["Entries"]
        sent = await self._send(self.queue_id(payload), [e["MessageBody"] for e in entries])
        return {"Successful": [{"Id": e["Id"], "MessageId": mid, "MD5OfMessageBody": md5}
                               for e, (mid, md5) in zip(entries, sent)], "Failed": []}

    async def ReceiveMessage(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        queue_id = self.queue_id(payload)
        limit = int(payload.get("MaxNumberOfMessages", 1))
        visibility = float(payload.get("VisibilityTimeout", 30))
        deadline = time.monotonic() + float(payload.get("WaitTimeSeconds", 0))

        def claim(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            now = time.time()
            rows = conn.execute(CLAIM, (now + visibility, queue_id, now, limit)).fetchall()
            return [{"MessageId": message_id, "ReceiptHandle": f"{row_id}:{receipt}", "MD5OfBody": md5, "Body": body}
                    for row_id, message_id, body, md5, receipt in rows]

        while True:
            waiter = asyncio.get_running_loop().create_future()
            self.waiters[queue_id].add(waiter)  # before the claim: no send is missed
            try:
                messages = await self.db.run(claim)
                left = deadline - time.monotonic()
                if messages or left <= 0:
                    return {"Messages": messages} if messages else {}
                try:
                    await asyncio.wait_for(waiter, left)
                except asyncio.TimeoutError:
                    pass
            finally:
                self.waiters[queue_id].discard(waiter)

    async def _delete(self, handles: list[str]) -> None:
        pairs = [(int(h.split(":", 1)[0]), h.split(":", 1)[1]) for h in handles]
        await self.db.run(lambda conn: conn.executemany("DELETE FROM messages WHERE id = ? AND receipt = ?", pairs))

    async def DeleteMessage(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        await self._delete([payload["ReceiptHandle"]])
        return {}

    async def DeleteMessageBatch(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        entries = payload["Entries"]
        await self._delete([e["ReceiptHandle"] for e in entries])
        return {"Successful": [{"Id": e["Id"]} for e in entries], "Failed": []}

    async def QueueserverBrowseMessages(self, payload: dict[str, Any], host: str) -> dict[str, Any]:
        queue_id, limit = self.queue_id(payload), int(payload.get("MaxNumberOfMessages", 10))
        after = int(payload.get("NextToken", 0))
        rows = await self.readers.run(lambda conn: conn.execute(BROWSE, (after, queue_id, limit)).fetchall())
        answer: dict[str, Any] = {"Messages": [{"MessageId": message_id, "MD5OfBody": md5, "Body": body}
                                               for _, message_id, body, md5 in rows]}
        if len(rows) == limit:
            answer["NextToken"] = str(rows[-1][0])
        return answer


def main() -> None:
    reference = Reference(sys.argv[1])

    async def endpoint(request: Request) -> Response:
        action = request.headers["x-amz-target"].rsplit(".", 1)[1]
        payload = json.loads(await request.body())
        try:
            answer = await getattr(reference, action)(payload, request.headers.get("host", "127.0.0.1"))
        except (KeyError, AttributeError, sqlite3.Error) as exc:
            return Response(json.dumps({"__type": "ReferenceError", "message": repr(exc)}), 400,
                            media_type="application/x-amz-json-1.0")
        return Response(json.dumps(answer, separators=(",", ":")), media_type="application/x-amz-json-1.0")

    app = Starlette(routes=[Route("/", endpoint, methods=["POST"])])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    config = uvicorn.Config(app, http="httptools", loop="uvloop", access_log=False, log_level="warning",
                            lifespan="off")
    print(f"READY http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
