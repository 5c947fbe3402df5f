"""An executor JVM of the standalone cluster killed (SIGKILL) mid-work: nothing is lost, nothing is deleted undone.

The queues are on the test-clock server: an item the dead executor held stays in flight
until the test moves the clock past its visibility timeout, so "it came back after its
visibility timeout, and not before" is shown without waiting for one.

The handlers stall while a file exists, so that the kill lands while the victim holds
work: a marker file `started/<body>@<pid>` says a handler (or UDF) began, `done/...` that
it finished; the pid tells which executor's Python worker ran it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from queueserver.spark.deployments import StandaloneCluster
from support.server import ClockControl
from support.spark import SqsTarget, descendants, identity, load, running, send, wait_for
from support.sqs import visible_and_in_flight
from support.wire import raw_json_call

pytestmark = [pytest.mark.spark, pytest.mark.spark_modes("cluster")]

VISIBILITY_TIMEOUT = 30  # on the test clock: it only passes when the test advances the clock


class Work:
    """The marker folders and the stall switch shared by the test and the executors."""

    def __init__(self, folder: Path) -> None:
        self.started, self.done, self.stall = folder / "started", folder / "done", folder / "stall"
        self.started.mkdir(parents=True)
        self.done.mkdir()

    @staticmethod
    def _marks(folder: Path) -> list[tuple[str, int, int]]:
        """(body, pid, receive count) of each marker."""
        marks = []
        for path in folder.iterdir():
            body, pid, count = path.name.split("@")[:3]
            marks.append((body, int(pid), int(count)))
        return marks

    def started_marks(self) -> list[tuple[str, int, int]]:
        return self._marks(self.started)

    def done_marks(self) -> list[tuple[str, int, int]]:
        return self._marks(self.done)

    def unfinished(self, pids: set[int]) -> set[str]:
        """Bodies a process in `pids` started and nobody finished."""
        done = {body for body, _, _ in self.done_marks()}
        return {body for body, pid, _ in self.started_marks() if pid in pids and body not in done}


def stalling_handler(work: Work) -> Any:
    """run_workers' handler: mark the start, wait while the stall file exists, work briefly, mark the end."""
    started, done, stall = work.started, work.done, work.stall

    def handle(message: dict[str, Any]) -> None:
        import os
        import time
        import uuid

        mark = f"{message['Body']}@{os.getpid()}@{message['Attributes']['ApproximateReceiveCount']}"
        (started / mark).touch()
        deadline = time.monotonic() + 300
        while stall.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.05)  # the work itself
        (done / f"{mark}@{uuid.uuid4().hex}").touch()

    return handle


def executors_by_pid(cluster: StandaloneCluster) -> dict[int, int]:
    """pid of every process under an executor JVM (its Python daemon and workers) -> that JVM's pid."""
    owners = {}
    for worker in range(cluster.workers):
        for executor in cluster.executor_pids(worker):
            owners[executor] = executor
            owners.update(dict.fromkeys(descendants(executor), executor))
    return owners


def kill_executor(executor: int) -> set[int]:
    """SIGKILL one executor JVM; wait until it and its Python workers are gone; their pids."""
    processes = [p for pid in (executor, *descendants(executor)) if (p := identity(pid))]
    os.kill(executor, signal.SIGKILL)
    wait_for(lambda: not any(running(p) for p in processes), "the executor and its Python workers to die",
             timeout=60)
    return {pid for pid, _ in processes}


def wait_for_two_executors(spark: Any) -> None:
    """Until the master has replaced the dead executor (the driver counts as one), so the next test has two."""
    tracker = spark.sparkContext.statusTracker()
    wait_for(lambda: len(tracker.getExecutorInfos()) >= 3, "a replacement executor", timeout=240)


def kill_an_executor_holding_work(cluster: StandaloneCluster, work: Work, sqs: Any,
                                  url: str) -> tuple[set[str], set[int], set[str]]:
    """Once the job is going, stall the handlers, SIGKILL the executor that holds two stalled items.

    Returns the items it held, its pids (JVM and Python workers) and the items done before the kill.
    """
    wait_for(lambda: len(work.done_marks()) >= 8, "the job to get going", timeout=240)
    work.stall.touch()  # from now on every handler that starts waits, holding its item

    def held() -> dict[int, set[str]]:
        owners = executors_by_pid(cluster)
        by_executor: dict[int, set[str]] = {}
        for body in work.unfinished(set(owners)):
            pid = next(p for b, p, _ in work.started_marks() if b == body)
            by_executor.setdefault(owners[pid], set()).add(body)
        return by_executor

    # Each executor's task holds two stalled items, and every finished item's delete has landed.
    wait_for(lambda: [len(h) for h in held().values()] == [2, 2] and visible_and_in_flight(sqs, url)[1] == 4,
             "both executors to hold two stalled items", timeout=180)
    victim, victim_items = sorted(held().items())[0]
    done_before = {body for body, _, _ in work.done_marks()}
    victim_pids = kill_executor(victim)
    work.stall.unlink()
    return victim_items, victim_pids, done_before


class StuckWithTheDead:
    """The items not done once nothing is visible, every one of them is in flight and none was started by a
    live process (only by the dead executor, or never), the same for a whole second: a live task starts what
    it receives at once, so an item it has only just received does not pass for the dead executor's."""

    def __init__(self, work: Work, items: list[str], dead: set[int], sqs: Any, url: str) -> None:
        self.work, self.items, self.dead, self.sqs, self.url = work, items, dead, sqs, url
        self.seen: tuple[frozenset[str], float] | None = None

    def __call__(self) -> set[str] | None:
        undone = frozenset(self.items) - {body for body, _, _ in self.work.done_marks()}
        live = {body for body, pid, _ in self.work.started_marks() if pid not in self.dead}
        if not undone or undone & live or visible_and_in_flight(self.sqs, self.url) != (0, len(undone)):
            self.seen = None
            return None
        if self.seen is None or self.seen[0] != undone:
            self.seen = (undone, time.monotonic())
        return set(undone) if time.monotonic() - self.seen[1] >= 1.0 else None

    def describe(self) -> str:
        """Each undone item: who started it (dead or live pid, receive count) and its message's state."""
        done = {body for body, _, _ in self.work.done_marks()}
        starts: dict[str, list[str]] = {}
        for body, pid, count in self.work.started_marks():
            starts.setdefault(body, []).append(f"{'dead' if pid in self.dead else 'live'} {pid} receive {count}")
        answer = raw_json_call(self.sqs.meta.endpoint_url, "QueueserverBrowseMessages",
                               {"QueueUrl": self.url, "MaxNumberOfMessages": 1000}).json()
        states = {m["Body"]: f"{m.get('State')} receives {m.get('Attributes', {}).get('ApproximateReceiveCount')}"
                  for m in answer.get("Messages", [])}
        lines = [f"visible, in flight: {visible_and_in_flight(self.sqs, self.url)}; {len(done)} done"]
        lines += [f"{body}: started by {starts.get(body, ['nobody'])}; message {states.get(body, 'gone')}"
                  for body in sorted(set(self.items) - done)]
        lines += [f"done but still there: {body} {state}" for body, state in sorted(states.items()) if body in done]
        return "\n".join(lines)


def test_an_executor_killed_during_run_workers_loses_no_item_and_its_items_come_back_after_their_visibility_timeout(
        spark: Any, spark_cluster: StandaloneCluster, clocked_target: SqsTarget, spark_clock: ClockControl,
        make_clocked_queue: Any, tmp_path: Path) -> None:
    from queueserver.spark import run_workers

    sqs = clocked_target.client()
    url = make_clocked_queue("executor-loss")
    items = [f"item-{i}" for i in range(40)]
    send(sqs, url, items)
    work = Work(tmp_path)
    outcome: dict[str, Any] = {}

    def job() -> None:
        try:
            outcome["counts"] = run_workers(spark, clocked_target.endpoint, url, stalling_handler(work), parallelism=2,
                                            visibility_timeout=VISIBILITY_TIMEOUT, concurrency=2, wait_time_seconds=1,
                                            idle_polls=2, **clocked_target.helper_options())
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = exc

    runner = threading.Thread(target=job)
    runner.start()
    try:
        held_items, victim_pids, done_before = kill_an_executor_holding_work(spark_cluster, work, sqs, url)
        # The survivor (and Spark's rerun of the lost task) finish everything else; what the victim held
        # stays in flight, because its visibility timeout has not passed on the server's clock: the two
        # stalled items, and any message a receive of its had taken in the instant before the kill.
        stuck = StuckWithTheDead(work, items, victim_pids, sqs, url)
        victim_items = wait_for(stuck, "every item to be done or in flight with the killed executor", timeout=240,
                                detail=lambda: f"{stuck.describe()}\nrun_workers: {outcome or 'running'}")
        spark_clock.advance(VISIBILITY_TIMEOUT + 1)
        runner.join(timeout=240)
        assert not runner.is_alive(), "run_workers did not finish after the clock moved"
    finally:
        work.stall.unlink(missing_ok=True)
        if runner.is_alive():  # a failed test must not leave the job holding the executors' cores
            spark.interruptAll()
            runner.join(timeout=120)
    assert "error" not in outcome, outcome

    done = work.done_marks()
    assert Counter(body for body, _, _ in done) == Counter(items)  # every item done exactly once
    redone = {body: (pid, count) for body, pid, count in done if body in victim_items}
    assert all(pid not in victim_pids and count == 2 for pid, count in redone.values()), redone
    # Received twice: only what the killed executor had taken (what it held may come back before the clock moves).
    assert all(count == 1 for body, _, count in done if body not in victim_items | held_items)
    by_victim = sum(1 for _, pid, _ in done if pid in victim_pids)
    counts = outcome["counts"]
    assert counts.workers == 2  # the surviving task and the rerun of the lost one
    assert counts.succeeded + by_victim == len(items) and counts.deleted == counts.succeeded
    assert counts.failed == 0 and visible_and_in_flight(sqs, url) == (0, 0)
    print(f"\nexecutor loss during run_workers: {len(items)} items; {len(done_before)} done before the kill "
          f"({by_victim} of them by the killed executor); it held {len(victim_items)}, redone after the clock "
          f"passed their visibility timeout with receive count 2; counts of the surviving tasks: {counts}")
    wait_for_two_executors(spark)


def test_an_executor_killed_during_a_streaming_batch_then_a_restart_from_the_checkpoint_loses_no_message(
        spark: Any, spark_cluster: StandaloneCluster, clocked_target: SqsTarget, spark_clock: ClockControl,
        make_clocked_queue: Any, tmp_path: Path) -> None:
    from pyspark.sql.functions import udf

    sqs = clocked_target.client()
    url = make_clocked_queue("stream-executor-loss")
    bodies = [f"m{i}" for i in range(60)]
    send(sqs, url, bodies)
    work = Work(tmp_path / "work")
    started, stall = work.started, work.stall

    def hold(body: str) -> str:
        import os
        import time

        (started / f"{body}@{os.getpid()}@0").touch()
        deadline = time.monotonic() + 300
        while stall.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return body

    out, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def start(trigger: dict[str, Any]) -> Any:
        df = load(spark.readStream, clocked_target, url, maxMessagesPerBatch="20", numPartitions="2",
                  visibilityTimeout=str(VISIBILITY_TIMEOUT))
        held = udf(hold, "string", useArrow=False)("body").alias("body")
        return (df.select("message_id", held).writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())

    def started_bodies() -> set[str]:
        return {body for body, _, _ in work.started_marks()}

    # 1. An executor dies in the middle of batch 0: Spark runs its task again, from the same rows.
    stall.touch()
    query = start({"processingTime": "500 milliseconds"})
    try:
        owners: dict[int, int] = {}

        def running_on_an_executor() -> bool:
            owners.update(executors_by_pid(spark_cluster))
            return any(pid in owners for _, pid, _ in work.started_marks())

        wait_for(running_on_an_executor, "batch 0 to reach the UDF", timeout=240)
        kill_executor(min(owners[pid] for _, pid, _ in work.started_marks() if pid in owners))
        stall.unlink()
        wait_for(lambda: any(p["batchId"] == 0 for p in query.recentProgress), "batch 0 to commit", timeout=240)
        assert [p["numInputRows"] for p in query.recentProgress if p["batchId"] == 0] == [20]

        # 2. The query is stopped in the middle of batch 1 and started again from its checkpoint.
        stall.touch()
        wait_for(lambda: len(started_bodies()) > 20, "batch 1 to reach the UDF", timeout=120)
    finally:
        query.stop()
        stall.unlink(missing_ok=True)
    assert visible_and_in_flight(sqs, url) == (20, 20)  # batch 0 deleted, batch 1 held (never committed)
    spark_clock.advance(VISIBILITY_TIMEOUT + 1)
    assert visible_and_in_flight(sqs, url) == (40, 0)
    query = start({"availableNow": True})
    assert query.awaitTermination(240) and query.exception() is None

    rows = spark.read.parquet(str(out)).collect()
    ids = Counter(row.message_id for row in rows)
    assert sorted({row.body for row in rows}) == sorted(bodies)  # every message at least once
    assert len(ids) == len(bodies)  # deduplicated on message_id: exactly once
    assert visible_and_in_flight(sqs, url) == (0, 0)
    print(f"\nexecutor loss during a stream, then a restart: {len(bodies)} messages; the sink holds {len(rows)} "
          f"rows, {len(ids)} distinct message ids, {sum(n - 1 for n in ids.values())} duplicate(s)")
    wait_for_two_executors(spark)
