"""What a standby answers from: a snapshot of its copy, behind a read-only door.

Litestream's follow mode writes the copy's pages under SQLite, so a connection held open on the
copy keeps serving what it cached (measured: it saw none of an update). The standby therefore
never opens the copy for serving: after the copy moves on (at most every REFRESH_SECONDS, and
no more often than SLOWER times what the last snapshot took, so a large database is copied less
often), SQLite's online backup takes a consistent snapshot of it into a private file (0600), the
engine opens on that, and the next request is answered from it. The previous snapshot is closed
and removed as soon as the requests it was answering are (none waits long: no receive runs here).

The door: handlers and the console reach the snapshot's engine only through ReadOnlyEngine,
which passes the calls of READ_CALLS (and of its topics, TOPIC_READ_CALLS) and refuses every other (a call not listed is a write: fail
closed) with the standby's 503 ServiceUnavailable, which SDKs retry. So GetQueueUrl, ListQueues,
GetQueueAttributes, ListQueueTags, ListDeadLetterSourceQueues, browse and the console's pages
answer; SendMessage, ReceiveMessage (a receive changes the message), DeleteMessage and the rest do
not. The primary's engine is never wrapped: its requests pay nothing for this.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any, Callable

from queueserver import errors
from queueserver.clock import SystemClock
from queueserver.storage import QueueEngine, admin

log = logging.getLogger(__name__)

REFRESH_SECONDS = 1.0
SLOWER = 4  # a snapshot is taken at most once per this many times the last one's duration
CLOSE_AFTER_SECONDS = 30.0  # the longest a replaced snapshot waits for the requests it is answering

# The engine's calls a standby serves: reads, and what the server's plumbing needs.
READ_CALLS = frozenset({
    "clock", "durable", "health", "observe", "queue_tallies", "test_clock", "begin_shutdown",
    "get_queue", "find_queue_by_arn", "list_queues", "queues_by_name", "queue_count", "dead_letter_sources",
    "queue_counts", "list_subscriptions", "list_move_tasks", "traffic_per_minute", "browse_messages",
})
# The topics' calls a standby serves (ListTopics, GetTopicAttributes, the subscription lists and attributes);
# CreateTopic, Subscribe, Publish and the rest are writes, refused like the engine's.
TOPIC_READ_CALLS = frozenset({"load", "get", "listed", "loaded", "subscription", "subscriptions", "topic_of"})


class ReadOnlyEngine:
    """A snapshot's engine as handlers and the console see it: the calls of READ_CALLS pass, any other
    raises the standby's refusal (ServiceUnavailable) before it does anything."""

    def __init__(self, engine: Any, refusal: Callable[[], errors.SQSError],
                 reads: frozenset[str] = READ_CALLS) -> None:
        self._engine = engine
        self._refusal = refusal
        self._reads = reads

    def __getattr__(self, name: str) -> Any:
        if name in self._reads:
            return getattr(self._engine, name)
        refusal = self._refusal
        if name == "topics" and self._reads is READ_CALLS:
            return ReadOnlyEngine(self._engine.topics, refusal, TOPIC_READ_CALLS)

        def refused(*args: Any, **kwargs: Any) -> Any:
            raise refusal()

        return refused


Reader = Callable[[Any, Any, Any], Any]  # an ASGI app


class _Snapshot:
    """One snapshot: its engine, its file, its app, and the requests it is answering."""

    def __init__(self, engine: QueueEngine, path: str, app: Reader) -> None:
        self.engine, self.path, self._app = engine, path, app
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self._active += 1
        self._idle.clear()
        try:
            await self._app(scope, receive, send)
        finally:
            self._active -= 1
            if not self._active:
                self._idle.set()

    async def close(self, wait: bool) -> None:
        """Closed and removed, once its requests are answered (`wait`; at most CLOSE_AFTER_SECONDS)."""
        try:
            if wait:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), CLOSE_AFTER_SECONDS)
        finally:
            await self.engine.close()
            _remove(self.path)


class Snapshots:
    """The current snapshot (its app; None until the first), kept current with the copy by `run()`."""

    def __init__(self, copy_path: str, position: Callable[[], int | None],
                 open_app: Callable[[ReadOnlyEngine], Reader], refusal: Callable[[], errors.SQSError]) -> None:
        self._copy_path = copy_path
        self._position = position  # the copy's position; None until Litestream has restored it
        self._open_app = open_app
        self._refusal = refusal
        self.app: _Snapshot | None = None
        self._taken_at: int | None = None
        self._count = 0
        self._closing: set[asyncio.Task] = set()

    async def run(self) -> None:
        """Until cancelled: a new snapshot whenever the copy has moved on."""
        for left in _leftovers(self._copy_path):  # of a standby that was killed
            _remove(left)
        wait = REFRESH_SECONDS
        while True:
            await asyncio.sleep(wait)
            position = self._position()
            if position is None or position == self._taken_at:
                continue
            began = time.monotonic()
            try:
                await self._take(position)
            except Exception as exc:  # noqa: BLE001 - the next refresh tries again; the old snapshot still answers
                log.warning("could not take a snapshot of the standby's copy: %s", exc)
            wait = max(REFRESH_SECONDS, SLOWER * (time.monotonic() - began))

    async def _take(self, position: int) -> None:
        self._count += 1
        path = f"{self._copy_path}.snapshot-{self._count}"
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, admin.backup, self._copy_path, path)
        if self._position() != position:  # Litestream applied more while it was copied: maybe torn
            _remove(path)
            return
        engine = await QueueEngine.open(path, SystemClock())
        previous = self.app
        self.app, self._taken_at = _Snapshot(engine, path, self._open_app(ReadOnlyEngine(engine, self._refusal))), \
            position
        if previous is not None:
            task = asyncio.create_task(previous.close(wait=True))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """No snapshot any more (at promotion and at shutdown): every one closed and removed."""
        current, self.app = self.app, None
        closing = list(self._closing)
        for task in closing:
            task.cancel()
        await asyncio.gather(*closing, return_exceptions=True)
        if current is not None:
            await current.close(wait=False)
        for left in _leftovers(self._copy_path):
            _remove(left)


def _leftovers(copy_path: str) -> list[str]:
    folder, name = os.path.split(copy_path)
    prefix = f"{name}.snapshot-"
    return [os.path.join(folder, f) for f in os.listdir(folder or ".") if f.startswith(prefix)
            and not f.endswith(("-wal", "-shm"))]


def _remove(path: str) -> None:
    for each in (path, f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(each)
