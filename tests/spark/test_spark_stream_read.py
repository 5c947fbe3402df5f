"""readStream.format("queueserver"): at-least-once micro-batches, acknowledged only after Spark committed them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from support.spark import SqsTarget, batch_recorder, load, recorded_batches, send, wait_for
from support.sqs import visible_and_in_flight

pytestmark = pytest.mark.spark


def stream(spark: Any, target: SqsTarget, queue_url: str, **options: str) -> Any:
    return load(spark.readStream, target, queue_url, **options)


def start_available_now(df: Any, sink: Any, checkpoint: Path) -> Any:
    return df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True).start()


def run_available_now(df: Any, sink: Any, checkpoint: Path, timeout: float = 120) -> None:
    query = start_available_now(df, sink, checkpoint)
    assert query.awaitTermination(timeout), "the availableNow query did not end"
    if query.exception() is not None:
        raise AssertionError(f"the query failed: {query.exception()}")


@pytest.mark.spark_modes("local", "cluster")
def test_available_now_drains_the_queue_in_limited_batches_and_acknowledges_every_message(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("drain")
    send(spark_sqs, url, [f"m{i}" for i in range(35)],
         MessageAttributes={"kind": {"DataType": "String", "StringValue": "t"}})

    run_available_now(stream(spark, target, url, maxMessagesPerBatch="10"), batch_recorder(tmp_path / "out"),
                      tmp_path / "ck")

    batches = [rows for _, rows in recorded_batches(tmp_path / "out")]
    bodies = [row.body for batch in batches for row in batch]
    assert sorted(bodies) == sorted(f"m{i}" for i in range(35))  # every message once
    assert [len(b) for b in batches if b] == [10, 10, 10, 5]
    first = batches[0][0]
    assert first.attributes == {"kind": "t"} and first.receive_count == 1 and first.receipt_handle is None
    assert visible_and_in_flight(spark_sqs, url) == (0, 0)  # the last batch too: nothing left in flight


@pytest.mark.spark_modes("local")
def test_a_failing_sink_leaves_its_batch_on_the_queue_and_it_comes_back_after_the_visibility_timeout(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("failing-sink")
    send(spark_sqs, url, [f"f{i}" for i in range(12)])

    def failing(df: Any, batch_id: int) -> None:
        df.count()
        raise RuntimeError("the sink could not write")

    query = start_available_now(stream(spark, target, url, visibilityTimeout="2"), failing, tmp_path / "ck")
    with pytest.raises(Exception, match="the sink could not write"):
        query.awaitTermination(90)
    assert visible_and_in_flight(spark_sqs, url) == (0, 12)  # received, not deleted
    wait_for(lambda: visible_and_in_flight(spark_sqs, url) == (12, 0), "the failed batch to come back", timeout=15)

    # The same checkpoint: Spark replays the failed batch, which this new run does not hold
    # (it is empty), then reads the messages again as a new batch.
    run_available_now(stream(spark, target, url), batch_recorder(tmp_path / "out"), tmp_path / "ck")
    seen = [row for _, rows in recorded_batches(tmp_path / "out") for row in rows]
    assert sorted(r.body for r in seen) == sorted(f"f{i}" for i in range(12))
    assert {r.receive_count for r in seen} == {2}
    assert visible_and_in_flight(spark_sqs, url) == (0, 0)


@pytest.mark.spark_modes("local")
def test_with_release_on_stop_a_failed_batch_is_visible_again_at_once(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("release-on-stop")
    send(spark_sqs, url, [f"r{i}" for i in range(4)])

    def failing(df: Any, batch_id: int) -> None:
        raise RuntimeError("the sink could not write")

    query = start_available_now(stream(spark, target, url, visibilityTimeout="60", releaseOnStop="true"), failing,
                                tmp_path / "ck")
    with pytest.raises(Exception, match="the sink could not write"):
        query.awaitTermination(90)
    # Spark ends the source's process with SIGTERM; the reader releases what it held (visibility 0).
    wait_for(lambda: visible_and_in_flight(spark_sqs, url) == (4, 0), "the released batch", timeout=15)


@pytest.mark.spark_modes("local")
def test_the_heartbeat_keeps_a_batch_longer_than_the_visibility_timeout_from_a_competing_consumer(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    stolen: dict[str, list[str]] = {}
    for label, heartbeat in (("with", "0.5"), ("without", "0")):
        url = make_spark_queue(f"heartbeat-{label}")
        send(spark_sqs, url, [f"h{i}" for i in range(5)])
        started, release = tmp_path / f"started-{label}", tmp_path / f"release-{label}"

        def slow(df: Any, batch_id: int, started: Path = started, release: Path = release) -> None:
            import time

            df.count()
            started.touch()
            deadline = time.monotonic() + 120
            while not release.exists() and time.monotonic() < deadline:  # the test decides when the batch ends
                time.sleep(0.05)

        query = start_available_now(stream(spark, target, url, visibilityTimeout="2", heartbeatInterval=heartbeat),
                                    slow, tmp_path / f"ck-{label}")
        wait_for(started.exists, "the batch to reach the sink", timeout=120)
        got = stolen.setdefault(label, [])
        deadline = time.monotonic() + 5  # the batch is held for 2.5 visibility timeouts
        while time.monotonic() < deadline:
            got += [m["Body"] for m in spark_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                                 VisibilityTimeout=30).get("Messages", [])]
            time.sleep(0.2)
        release.touch()
        assert query.awaitTermination(120) and query.exception() is None
        if label == "with":
            assert visible_and_in_flight(spark_sqs, url) == (0, 0)
    assert stolen["with"] == []
    assert sorted(stolen["without"]) == [f"h{i}" for i in range(5)]  # the control: the test can see a theft


@pytest.mark.spark_modes("local")
def test_fifo_messages_of_one_group_stay_in_one_partition_in_order(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("fifo-stream", fifo=True, attributes={"ContentBasedDeduplication": "true"})
    groups = ["a", "b", "c", "d"]
    bodies = [f"{groups[i % 4]}-{i // 4}" for i in range(24)]  # interleaved: a-0 b-0 c-0 d-0 a-1 ...
    send(spark_sqs, url, bodies, MessageGroupId=lambda i: groups[i % 4])

    run_available_now(stream(spark, target, url, numPartitions="2", maxMessagesPerBatch="12"),
                      batch_recorder(tmp_path / "out", partition_ids=True), tmp_path / "ck")

    delivered = [(batch, row.partition_id, row.body) for batch, rows in recorded_batches(tmp_path / "out")
                 for row in rows]
    assert sorted(b for _, _, b in delivered) == sorted(bodies)
    for group in groups:
        mine = [(batch, pid, body) for batch, pid, body in delivered if body.startswith(group)]
        assert [int(body.split("-")[1]) for _, _, body in mine] == list(range(6)), f"group {group} out of order"
        per_batch: dict[int, set[int]] = {}
        for batch, pid, _ in mine:
            per_batch.setdefault(batch, set()).add(pid)
        assert all(len(pids) == 1 for pids in per_batch.values()), f"group {group} split across partitions"
    assert len({pid for _, pid, _ in delivered}) == 2  # the groups did spread over both partitions
    assert visible_and_in_flight(spark_sqs, url) == (0, 0)


@pytest.mark.spark_modes("local")
def test_a_running_stream_acknowledges_each_batch_soon_after_its_commit(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("continuous")
    out = tmp_path / "out"

    def seen() -> list[str]:
        return [row.body for _, rows in recorded_batches(out) for row in rows]

    query = stream(spark, target, url, waitTimeSeconds="1").writeStream.foreachBatch(batch_recorder(out)) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start()
    try:
        send(spark_sqs, url, [f"c{i}" for i in range(7)])
        wait_for(lambda: len(seen()) >= 7, "the stream to see the messages", timeout=60)
        wait_for(lambda: visible_and_in_flight(spark_sqs, url) == (0, 0), "the batch to be deleted", timeout=10)
        send(spark_sqs, url, [f"d{i}" for i in range(3)])
        wait_for(lambda: visible_and_in_flight(spark_sqs, url) == (0, 0) and len(seen()) >= 10, "the second batch")
    finally:
        query.stop()
    assert sorted(seen()) == sorted([f"c{i}" for i in range(7)] + [f"d{i}" for i in range(3)])
