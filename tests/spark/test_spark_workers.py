"""run_workers: competing consumers on the executors, with heartbeat, dead-lettering and restart after a kill."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.spark import SqsTarget, send, wait_for
from support.sqs import visible_and_in_flight

pytestmark = pytest.mark.spark


def recorded(directory: Path) -> Counter[str]:
    """How many times each item's handler finished, from the marker files the handlers wrote."""
    return Counter(p.name.split("@")[0] for p in directory.iterdir() if not p.name.startswith("."))


def make_handler(directory: Path, seconds: float = 0.0) -> Any:
    """A handler (pickled to the executors) that fails on "poison", works `seconds` (10 s for "slow"), then
    writes a marker `<body>@<pid>@<uuid>` once the work is done."""

    def handle(message: dict[str, Any]) -> None:
        body = message["Body"]
        if body == "poison":
            raise ValueError("this item always fails")
        time.sleep(4.0 if body == "slow" else seconds)
        (directory / f"{body}@{os.getpid()}@{uuid.uuid4().hex}").touch()

    return handle


# On the cluster run_workers runs in test_spark_executor_loss.py, with an executor killed under it.
@pytest.mark.spark_modes("local", "connect")
def test_run_workers_does_every_item_once_and_sends_a_poison_item_to_the_dead_letter_queue(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    from queueserver.spark import run_workers

    url = make_spark_queue("work", dead_letter_after=2)
    dlq = make_spark_queue.dead_letters[url]
    items = [f"item-{i}" for i in range(14)] + ["slow", "poison"]
    send(spark_sqs, url, items)

    result = run_workers(spark, target.endpoint, url, make_handler(tmp_path), parallelism=2, visibility_timeout=2,
                         wait_time_seconds=1, idle_polls=2, **target.helper_options())

    done = recorded(tmp_path)
    assert done == Counter({item: 1 for item in items if item != "poison"})  # the 4 s item (visibility 2 s) too
    assert (result.workers, result.succeeded, result.failed) == (2, 15, 2)  # poison failed twice, then moved
    assert result.deleted == 15 and result.extended >= 2
    assert visible_and_in_flight(spark_sqs, url) == (0, 0)
    moved = spark_sqs.receive_message(QueueUrl=dlq, MessageSystemAttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in moved] == ["poison"]


# Not on the cluster: there Spark retries a killed task and the job lives on (test_spark_executor_loss.py).
@pytest.mark.spark_modes("local")
def test_a_job_killed_halfway_and_started_again_finishes_the_rest_and_redoes_nothing_that_was_done(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    from queueserver.spark import run_workers
    from queueserver.spark.connection import browse_page

    url = make_spark_queue("restartable")
    items = [f"job-{i}" for i in range(40)]
    send(spark_sqs, url, items)
    first_run, second_run = tmp_path / "first", tmp_path / "second"
    first_run.mkdir()
    second_run.mkdir()
    outcome: dict[str, Any] = {}

    def first() -> None:
        try:
            outcome["counts"] = run_workers(spark, target.endpoint, url, make_handler(first_run, 0.25), parallelism=2,
                                            visibility_timeout=3, wait_time_seconds=1, idle_polls=2,
                                            **target.helper_options())
        except Exception as exc:  # noqa: BLE001 - the job is expected to die
            outcome["error"] = exc

    job = threading.Thread(target=first)
    job.start()
    wait_for(lambda: sum(recorded(first_run).values()) >= 10, "the first run to get going")
    pids = {int(p.name.split("@")[1]) for p in first_run.iterdir()}
    for pid in pids:  # the executors' Python workers die mid-work, as in a crash
        os.kill(pid, signal.SIGKILL)
    job.join(timeout=60)
    assert not job.is_alive() and "error" in outcome, outcome
    time.sleep(0.5)  # let a delete that was already on the wire land

    remaining = {m["Body"] for m in browse_page(spark_sqs, url)[0]}  # what the queue still holds: not done
    done_first = set(recorded(first_run))
    assert 0 < len(remaining) < len(items)
    assert remaining | done_first == set(items)

    result = run_workers(spark, target.endpoint, url, make_handler(second_run, 0.05), parallelism=2,
                         visibility_timeout=3, wait_time_seconds=1, idle_polls=2, **target.helper_options())

    again = recorded(second_run)
    assert set(again) == remaining  # finishes the rest: the items the kill interrupted come back after 3 s
    assert max(again.values()) == 1
    assert not (set(again) & (done_first - remaining))  # nothing whose delete went through is redone
    assert result.succeeded == len(remaining) == result.deleted
    assert visible_and_in_flight(spark_sqs, url) == (0, 0)
