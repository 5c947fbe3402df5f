"""`run_workers`: competing consumers on the executors, for jobs that hand work to each other through a queue.

Each of `parallelism` Spark tasks runs one `queueserver.consumer.Worker` (the same
worker as `queueserver worker`): it pulls work items, keeps them invisible with its
visibility heartbeat while the handler runs, deletes on success and, on failure,
releases the item at once (MakeVisibleNow, unless another failure policy is given), so
an item that keeps failing reaches the dead-letter queue through the queue's own
RedrivePolicy. No Data Source API is involved: the tasks only host the workers. They
are a DataFrame, `spark.range(n, numPartitions=n).mapInArrow(...)`, not an RDD, because
that runs the same in a classic session and over Spark Connect, which has no SparkContext.

When does a task stop? With `drain=True` (the default) only when it has been idle for
`idle_polls` long polls, no handler of its own is running, and the queue reports
nothing visible, nothing in flight and nothing delayed. Why wait for in-flight work
held by others: if an executor (or the previous run of the job) died holding items,
they come back when their visibility ends, and somebody must still be polling then.
That is also what makes a killed job restartable: everything deleted was done, so a
new run finishes exactly what is left (after the dead run's items time out).
With `drain=False` a task stops after `idle_polls` empty polls whatever the counts say.

If an executor dies, Spark runs its task again elsewhere. What the dead task had deleted
is done; what it held comes back after its visibility timeout and is done by a task
still polling. The counts returned are those of the tasks that finished: a dead task's
are lost with it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any

from queueserver.consumer import FailurePolicy, MakeVisibleNow, Worker
from queueserver.spark.compat import require_pyspark
from queueserver.spark.connection import Connection

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # how often a task looks at its worker's activity


@dataclass(frozen=True)
class WorkCounts:
    """What a run_workers call did, summed over its tasks (see WorkerCounters for each field)."""

    workers: int = 0
    received: int = 0
    succeeded: int = 0
    failed: int = 0
    deleted: int = 0
    extended: int = 0
    released: int = 0
    lost: int = 0
    errors: int = 0
    seconds: float = 0.0


COUNTED = tuple(f.name for f in fields(WorkCounts) if f.name not in ("workers", "seconds"))
RESULT_SCHEMA = ", ".join(f"{name} long" for name in ("index", *COUNTED))


@dataclass(frozen=True)
class _WorkPlan:
    connection: Connection  # its queue is the resolved URL
    visibility_timeout: int
    heartbeat_interval: float
    concurrency: int
    wait_time_seconds: int
    idle_seconds: float
    drain: bool
    failure_policy: FailurePolicy
    shutdown_grace_period: float
    max_seconds: float | None


def run_workers(spark: Any, endpoint: str | None, queue: str, handler: Callable[[dict[str, Any]], Any],
                parallelism: int = 2, visibility_timeout: int = 30, *, heartbeat_interval: float | None = None,
                concurrency: int = 1, wait_time_seconds: int = 1, idle_polls: int = 3, drain: bool = True,
                failure_policy: FailurePolicy | None = None, shutdown_grace_period: float = 60.0,
                max_seconds: float | None = None, region: str | None = None, access_key_id: str | None = None,
                secret_access_key: str | None = None) -> WorkCounts:
    """Consume `queue` with `handler` on `parallelism` Spark tasks until the work is done; the counts.

    handler(message) gets each message as boto3 returns it (Body, MessageId, Attributes,
    MessageAttributes…); returning succeeds (the item is deleted), raising fails it. It
    is pickled to the executors, so it must be importable there or defined in the driver
    script. `concurrency` handlers run at once in each task (threads; FIFO: groups).
    The heartbeat extends an item every `heartbeat_interval` seconds (visibility_timeout / 3
    by default); 0 turns it off. If the job is killed, items being worked on come back
    after `visibility_timeout` and the next run does them; items already deleted are done.
    `max_seconds` bounds each task's time (its items in progress are finished or released).
    Each task holds an executor core until the work is done: with more tasks than cores, the
    extra ones start only when others have finished.
    """
    require_pyspark()
    if parallelism < 1:
        raise ValueError("parallelism must be at least 1")
    if idle_polls < 1:
        raise ValueError("idle_polls must be at least 1")
    interval = visibility_timeout / 3 if heartbeat_interval is None else heartbeat_interval
    connection = Connection(queue=queue, endpoint=endpoint, region=region, access_key_id=access_key_id,
                            secret_access_key=secret_access_key)
    queue_url = connection.queue_url()  # a missing queue fails here, on the driver, not in every task
    plan = _WorkPlan(Connection(queue=queue_url, endpoint=endpoint, region=region, access_key_id=access_key_id,
                                secret_access_key=secret_access_key),
                     visibility_timeout, interval, concurrency, wait_time_seconds,
                     idle_polls * max(1, wait_time_seconds), drain, failure_policy or MakeVisibleNow(),
                     shutdown_grace_period, max_seconds)
    # Build a Worker here once, so that a bad option fails on the driver with the worker's own message.
    Worker(None, queue_url, handler, **_worker_options(plan))
    started = time.monotonic()
    # One row per task, one task per row: range's own partitions, so no shuffle (which adaptive
    # execution could coalesce into fewer tasks). The DataFrame API works in classic and Connect sessions.
    tasks = spark.range(0, parallelism, 1, parallelism).mapInArrow(functools.partial(_work_task, plan, handler),
                                                                 RESULT_SCHEMA)
    results = [row.asDict() for row in tasks.collect()]
    total = dict.fromkeys(COUNTED, 0)
    for counts in results:
        for name in total:
            total[name] += counts[name]
    counts = WorkCounts(workers=len(results), seconds=round(time.monotonic() - started, 3), **total)
    log.info("run_workers on %s done: %s", queue_url, counts)
    return counts


def _worker_options(plan: _WorkPlan) -> dict[str, Any]:
    heartbeat = plan.heartbeat_interval or None
    return {
        "max_concurrency": plan.concurrency, "visibility_timeout": plan.visibility_timeout,
        # Extend what has less than two heartbeats left: never a gap a message could expire in.
        "extension_threshold": min(plan.visibility_timeout, 2 * heartbeat) if heartbeat else 5.0,
        "heartbeat_interval": heartbeat, "wait_time_seconds": plan.wait_time_seconds,
        "failure_policy": plan.failure_policy, "shutdown_grace_period": plan.shutdown_grace_period,
    }


class _Activity:
    """Wraps the handler to know whether one is running and when the task last did something.

    Why wrap the handler rather than count the worker's events: a message can leave the
    worker without its handler ever running (lost before it started), and only the
    handler's own entry and exit say for sure that nothing is running.
    """

    def __init__(self, handler: Callable[[dict[str, Any]], Any]) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._last = time.monotonic()
        if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None)):  # noqa: B004
            async def wrapped_async(message: dict[str, Any]) -> Any:
                self._enter()
                try:
                    return await handler(message)
                finally:
                    self._exit()
            self.handler: Callable[[dict[str, Any]], Any] = wrapped_async
        else:
            def wrapped(message: dict[str, Any]) -> Any:
                self._enter()
                try:
                    return handler(message)
                finally:
                    self._exit()
            self.handler = wrapped

    def _enter(self) -> None:
        with self._lock:
            self._running += 1
            self._last = time.monotonic()

    def _exit(self) -> None:
        with self._lock:
            self._running -= 1
            self._last = time.monotonic()

    def touch(self) -> None:
        with self._lock:
            self._last = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since a handler last started or ended (0 while one runs)."""
        with self._lock:
            return 0.0 if self._running else time.monotonic() - self._last


def _queue_is_empty(plan: _WorkPlan) -> bool:
    names = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed")
    try:
        attrs = plan.connection.queue_attributes(plan.connection.queue, *names)
    except Exception as exc:  # noqa: BLE001 - cannot tell: keep working, ask again later
        log.warning("could not read %s's counts: %s", plan.connection.queue, exc)
        return False
    return all(int(attrs.get(name, "0")) == 0 for name in names)


def _work_task(plan: _WorkPlan, handler: Callable[[dict[str, Any]], Any], batches: Iterator[Any]) -> Iterator[Any]:
    """One Spark task (mapInArrow over one row, its index): run a Worker, yield its counts as one row."""
    import pyarrow as pa

    indexes = [index for batch in batches for index in batch.column(0).to_pylist()]
    counts = _work(plan, handler, indexes[0] if indexes else 0)
    yield pa.RecordBatch.from_pylist([{name: counts[name] for name in ("index", *COUNTED)}],
                                     schema=pa.schema([(name, pa.int64()) for name in ("index", *COUNTED)]))


def _work(plan: _WorkPlan, handler: Callable[[dict[str, Any]], Any], index: int) -> dict[str, int]:
    """Run a Worker until the work is done (see the module docstring); its counters."""
    activity = _Activity(handler)
    worker = Worker(plan.connection.client(), plan.connection.queue, activity.handler, **_worker_options(plan))
    started = time.monotonic()
    worker.start()
    try:
        while not worker.join(timeout=POLL_SECONDS):  # raises if the worker crashed
            if plan.max_seconds is not None and time.monotonic() - started >= plan.max_seconds:
                log.warning("worker %d: max_seconds (%g) reached; stopping", index, plan.max_seconds)
                break
            counters = worker.counters
            if activity.idle_for() < plan.idle_seconds or counters.received > counters.succeeded + counters.failed + counters.released + counters.lost:
                continue
            if not plan.drain or _queue_is_empty(plan):
                break
            activity.touch()  # others still hold work: look again after another idle spell
    finally:
        worker.stop()
        if not worker.join(timeout=plan.shutdown_grace_period + plan.wait_time_seconds + 30):
            log.error("worker %d did not stop in time", index)
    counters = worker.counters
    log.info("worker %d finished in %.1f s: %s", index, time.monotonic() - started, counters)
    return {f.name: getattr(counters, f.name) for f in fields(counters)} | {"index": index}
