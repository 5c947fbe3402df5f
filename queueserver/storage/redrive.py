"""Dead-letter redrive: message move tasks that survive restarts.

A task's state lives in `move_tasks`. Each step moves a chunk of messages and counts
them in the same transaction, so a kill at any instant neither loses nor doubles a
message, and a restarted server resumes every RUNNING task where it stopped. The
task moves the messages that were in the dead-letter queue when it started.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections import Counter
from dataclasses import fields
from typing import Callable

from queueserver import errors
from queueserver.clock import Clock
from queueserver.models import MoveTask, Queue
from queueserver.storage.database import Database
from queueserver.storage.operations import Transaction

log = logging.getLogger(__name__)

CHUNK = 100  # messages per step when the task has no rate
_LISTED = ", ".join(field.name for field in fields(MoveTask))  # move_tasks' columns are named as its fields


class Redriver:
    def __init__(self, db: Database, clock: Clock, find_queue: Callable[[str], Queue | None],
                 notify: Callable[[int, int | None], None], changed: Callable[[int], None]) -> None:
        self._db = db
        self._clock = clock
        self._find_queue = find_queue
        self._notify = notify
        self._changed = changed  # whose counts a step changed: its source and destinations
        self._runners: dict[int, asyncio.Task] = {}

    async def resume(self) -> None:
        """Carry on every task a stopped server left running."""
        def active(tx: Transaction) -> list[int]:
            tx.conn.execute("UPDATE move_tasks SET status = 'CANCELLED' WHERE status = 'CANCELLING'")
            return [row[0] for row in tx.conn.execute("SELECT id FROM move_tasks WHERE status = 'RUNNING'")]

        for task_id in await self._db.run(active):
            self._launch(task_id)

    async def close(self) -> None:
        self._db.health.stopping = True
        for runner in self._runners.values():
            runner.cancel()
        await asyncio.gather(*self._runners.values(), return_exceptions=True)

    async def start(self, source: Queue, destination_arn: str | None, rate: int | None,
                    authorize_origins: Callable[[list[str]], None] | None = None) -> str:
        """Start a task; `authorize_origins` is shown the queues its messages came from (the destinations of
        a task without one) in the transaction that starts it, and refuses the start by raising."""
        now = self._clock.now_ms()
        handle = base64.b64encode(json.dumps(
            {"taskId": str(uuid.uuid4()), "sourceArn": source.arn}).encode()).decode()

        def start(tx: Transaction) -> int:
            conn = tx.conn
            # A CANCELLING task moves nothing more (its next step only records CANCELLED): not active.
            if conn.execute("SELECT 1 FROM move_tasks WHERE source_queue_id = ? AND status = 'RUNNING'",
                            (source.id,)).fetchone():
                raise errors.InvalidParameterValue(
                    "There is already a task running. Only one active task is allowed for a source queue "
                    "arn at a given time.")
            if authorize_origins is not None:
                authorize_origins([row[0] for row in conn.execute(
                    "SELECT DISTINCT b.dead_letter_source_arn FROM messages m"
                    " JOIN message_bodies b ON b.id = coalesce(m.body_id, m.id)"
                    " WHERE m.queue_id = ? AND b.dead_letter_source_arn IS NOT NULL", (source.id,))])
            last_row_id, to_move = conn.execute(
                "SELECT coalesce(max(id), 0), count(*) FROM messages WHERE queue_id = ?", (source.id,)).fetchone()
            return int(conn.execute(
                "INSERT INTO move_tasks (handle, source_queue_id, source_arn, destination_arn, rate, status,"
                " last_row_id, to_move, started_at_ms) VALUES (?, ?, ?, ?, ?, 'RUNNING', ?, ?, ?) RETURNING id",
                (handle, source.id, source.arn, destination_arn, rate, last_row_id, to_move, now)).fetchone()[0])

        self._launch(await self._db.run(start))
        return handle

    async def list(self, source: Queue, max_results: int) -> list[MoveTask]:
        """The source queue's tasks, newest first: its own, never those of a deleted queue of its name."""
        def select(tx: Transaction) -> list[tuple]:
            return tx.conn.execute(
                f"SELECT {_LISTED} FROM move_tasks WHERE source_queue_id = ? ORDER BY id DESC LIMIT ?",
                (source.id, max_results)).fetchall()

        return [MoveTask(*row) for row in await self._db.run(select)]

    @staticmethod
    def end_tasks_of_deleted(tx: Transaction, queue: Queue) -> None:
        """A deleted queue's tasks end, as on SQS: FAILED where it was the source or the destination
        of a running task (a task being cancelled ends CANCELLED); its runner stops at its next step."""
        tx.conn.execute("UPDATE move_tasks SET status = 'CANCELLED' WHERE status = 'CANCELLING' AND source_queue_id = ?",
                        (queue.id,))
        tx.conn.execute("UPDATE move_tasks SET status = 'FAILED', failure_reason = ?"
                        " WHERE status = 'RUNNING' AND source_queue_id = ?",
                        (f"The source queue {queue.arn} was deleted.", queue.id))
        tx.conn.execute("UPDATE move_tasks SET status = 'FAILED', failure_reason = ?"
                        " WHERE status = 'RUNNING' AND destination_arn = ?",
                        (f"The destination queue {queue.arn} does not exist.", queue.arn))

    async def cancel(self, handle: str) -> int:
        """Stop a running task; what it moved so far stays moved. From this answer on, a new task
        may start for the same source."""
        def cancel(tx: Transaction) -> int:
            row = tx.conn.execute("SELECT status, moved FROM move_tasks WHERE handle = ?", (handle,)).fetchone()
            if row is None or row[0] != "RUNNING":
                raise errors.ResourceNotFound("Task does not exist.")
            tx.conn.execute("UPDATE move_tasks SET status = 'CANCELLING' WHERE handle = ?", (handle,))
            return int(row[1])

        return await self._db.run(cancel)

    def _launch(self, task_id: int) -> None:
        runner = asyncio.create_task(self._run(task_id))
        self._db.health.watch_task(runner, f"move task {task_id}", may_return=True)
        self._runners[task_id] = runner
        runner.add_done_callback(lambda _: self._runners.pop(task_id, None))

    async def _run(self, task_id: int) -> None:
        """Step until the task ends; any failure pauses it (logged once) and it tries again each second."""
        paused = False
        while True:
            try:
                status, moved_to, step_size, rate, source_id = await self._db.run(lambda tx: self._step(tx, task_id))
            except Exception as exc:  # noqa: BLE001 - a task must outlive any failure
                if not paused:
                    log.warning("move task %d paused by a failure, retrying every second: %s", task_id,
                                getattr(exc, "message", None) or exc)
                    paused = True
                await asyncio.sleep(1)
                continue
            if paused:
                log.warning("move task %d resumed", task_id)
                paused = False
            if moved_to:
                self._changed(source_id)
                self._db.tally.redriven += sum(moved_to.values())
            for queue_id, count in moved_to.items():
                self._changed(queue_id)
                self._notify(queue_id, count)
            if status != "RUNNING":
                return
            # Pace to MaxNumberOfMessagesPerSecond; otherwise just let other work in.
            await asyncio.sleep(step_size / rate if rate else 0)

    def _step(self, tx: Transaction, task_id: int) -> tuple[str, Counter[int], int, int | None, int]:
        conn = tx.conn
        status, source_arn, destination_arn, rate, source_id, last_row_id = conn.execute(
            "SELECT status, source_arn, destination_arn, rate, source_queue_id, last_row_id"
            " FROM move_tasks WHERE id = ?", (task_id,)).fetchone()
        if status == "CANCELLING":
            conn.execute("UPDATE move_tasks SET status = 'CANCELLED' WHERE id = ?", (task_id,))
            return "CANCELLED", Counter(), 0, rate, source_id
        if status != "RUNNING":
            return status, Counter(), 0, rate, source_id
        now = self._clock.now_ms()
        step_size = max(1, min(CHUNK, rate // 10)) if rate else CHUNK  # ~10 paced steps a second
        source = self._find_queue(source_arn)
        cutoff = now - source.retention_seconds * 1000 if source else now  # expired ones stay to be swept
        rows = conn.execute(
            "SELECT m.id, b.dead_letter_source_arn FROM messages m JOIN message_bodies b ON b.id = coalesce(m.body_id, m.id)"
            " WHERE m.queue_id = ? AND m.id <= ? AND m.visible_at_ms <= ? AND m.enqueued_at_ms > ?"
            " ORDER BY m.id LIMIT ?",
            (source_id, last_row_id, now, cutoff, step_size)).fetchall()
        if not rows:
            conn.execute("UPDATE move_tasks SET status = 'COMPLETED' WHERE id = ?", (task_id,))
            return "COMPLETED", Counter(), 0, rate, source_id
        moves = []
        for row_id, origin_arn in rows:
            arn = destination_arn or origin_arn
            destination = self._find_queue(arn) if arn else None
            if destination is None:
                reason = f"The destination queue {arn} does not exist." if arn else \
                    "A message has no source queue to return to; give a DestinationArn."
                conn.execute("UPDATE move_tasks SET status = 'FAILED', failure_reason = ? WHERE id = ?",
                             (reason, task_id))
                break
            moves.append((destination.id, now, now, row_id))
        # Back to a fresh start: a redriven message is received as if sent anew (its receive count and
        # retention start again, or it would expire or be dead-lettered on arrival), but keeps its MessageId.
        conn.executemany(
            "UPDATE messages SET queue_id = ?, visible_at_ms = ?, enqueued_at_ms = ?, receipt_token = random(),"
            " receive_count = 0, first_received_at_ms = 0, received_at_ms = 0 WHERE id = ?", moves)
        conn.executemany("UPDATE message_bodies SET dead_letter_source_arn = NULL"
                         " WHERE id = (SELECT coalesce(body_id, id) FROM messages WHERE id = ?)",
                         [(m[3],) for m in moves])
        conn.execute("UPDATE move_tasks SET moved = moved + ? WHERE id = ?", (len(moves), task_id))
        status = conn.execute("SELECT status FROM move_tasks WHERE id = ?", (task_id,)).fetchone()[0]
        return status, Counter(m[0] for m in moves), len(moves), rate, source_id
