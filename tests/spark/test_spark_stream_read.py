"""readStream.format("queueserver"): at-least-once micro-batches, acknowledged only after Spark committed them."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.spark import load, send, wait_for
from support.sqs import visible_and_in_flight

pytestmark = pytest.mark.spark


def stream(spark: Any, endpoint: str, queue_url: str, **options: str) -> Any:
    return load(spark.readStream, endpoint, queue_url, **options)


def run_available_now(df: Any, sink: Any, checkpoint: Path, timeout: float = 90) -> None:
    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True).start()
    assert query.awaitTermination(timeout), "the availableNow query did not end"
    if query.exception() is not None:
        raise AssertionError(f"the query failed: {query.exception()}")


def test_available_now_drains_the_queue_in_limited_batches_and_acknowledges_every_message(
        spark: Any, endpoint: str, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("drain")
    send(spark_sqs, url, [f"m{i}" for i in range(35)],
         MessageAttributes={"kind": {"DataType": "String", "StringValue": "t"}})
    batches: list[list[Any]] = []

    def sink(df: Any, batch_id: int) -> None:
        batches.append(df.collect())

    run_available_now(stream(spark, endpoint, url, maxMessagesPerBatch="10"), sink, tmp_path / "ck")

    bodies = [row.body for batch in batches for row in batch]
    assert sorted(bodies) == sorted(f"m{i}" for i in range(35))  # every message once
    assert [len(b) for b in batches if b] == [10, 10, 10, 5]
    first = batches[0][0]
    assert first.attributes == {"kind": "t"} and first.receive_count == 1 and first.receipt_handle is None
    assert visible_and_in_flight(spark_sqs, url) == (0, 0)  # the last batch too: nothing left in flight


def test_a_failing_sink_leaves_its_batch_on_the_queue_and_it_comes_back_after_the_visibility_timeout(
        spark: Any, endpoint: str, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("failing-sink")
    send(spark_sqs, url, [f"f{i}" for i in range(12)])

    def failing(df: Any, batch_id: int) -> None:
        df.count()
        raise RuntimeError("the sink could not write")

    query = stream(spark, endpoint, url, visibilityTimeout="2").writeStream.foreachBatch(failing) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    with pytest.raises(Exception, match="the sink could not write"):
        query.awaitTermination(60)
    assert visible_and_in_flight(spark_sqs, url) == (0, 12)  # received, not deleted
    wait_for(lambda: visible_and_in_flight(spark_sqs, url) == (12, 0), "the failed batch to come back", timeout=15)

    seen: list[Any] = []
    # The same checkpoint: Spark replays the failed batch, which this new run does not hold
    # (it is empty), then reads the messages again as a new batch.
    run_available_now(stream(spark, endpoint, url), lambda df, _: seen.extend(df.collect()), tmp_path / "ck")
    assert sorted(r.body for r in seen) == sorted(f"f{i}" for i in range(12))
    assert {r.receive_count for r in seen} == {2}
    assert visible_and_in_flight(spark_sqs, url) == (0, 0)


def test_with_release_on_stop_a_failed_batch_is_visible_again_at_once(
        spark: Any, endpoint: str, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("release-on-stop")
    send(spark_sqs, url, [f"r{i}" for i in range(4)])

    def failing(df: Any, batch_id: int) -> None:
        raise RuntimeError("the sink could not write")

    query = stream(spark, endpoint, url, visibilityTimeout="60", releaseOnStop="true").writeStream \
        .foreachBatch(failing).option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    with pytest.raises(Exception, match="the sink could not write"):
        query.awaitTermination(60)
    # Spark ends the source's process with SIGTERM; the reader releases what it held (visibility 0).
    wait_for(lambda: visible_and_in_flight(spark_sqs, url) == (4, 0), "the released batch", timeout=15)


def test_the_heartbeat_keeps_a_batch_longer_than_the_visibility_timeout_from_a_competing_consumer(
        spark: Any, endpoint: str, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    stolen: dict[str, list[str]] = {}
    for label, heartbeat in (("with", "0.5"), ("without", "0")):
        url = make_spark_queue(f"heartbeat-{label}")
        send(spark_sqs, url, [f"h{i}" for i in range(5)])

        def slow(df: Any, batch_id: int, url: str = url, label: str = label) -> None:
            df.count()
            got = stolen.setdefault(label, [])
            deadline = time.monotonic() + 5  # 2.5 visibility timeouts
            while time.monotonic() < deadline:
                got += [m["Body"] for m in spark_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                               VisibilityTimeout=30).get("Messages", [])]
                time.sleep(0.2)

        run_available_now(stream(spark, endpoint, url, visibilityTimeout="2", heartbeatInterval=heartbeat),
                          slow, tmp_path / f"ck-{label}")
        if label == "with":
            assert visible_and_in_flight(spark_sqs, url) == (0, 0)
    assert stolen["with"] == []
    assert sorted(stolen["without"]) == [f"h{i}" for i in range(5)]  # the control: the test can see a theft


def test_fifo_messages_of_one_group_stay_in_one_partition_in_order(
        spark: Any, endpoint: str, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    from pyspark.sql.functions import spark_partition_id

    url = make_spark_queue("fifo-stream", fifo=True, attributes={"ContentBasedDeduplication": "true"})
    groups = ["a", "b", "c", "d"]
    bodies = [f"{groups[i % 4]}-{i // 4}" for i in range(24)]  # interleaved: a-0 b-0 c-0 d-0 a-1 ...
    send(spark_sqs, url, bodies, MessageGroupId=lambda i: groups[i % 4])
    delivered: list[tuple[int, str, str]] = []

    def sink(df: Any, batch_id: int) -> None:
        for row in df.withColumn("pid", spark_partition_id()).collect():
            delivered.append((batch_id, row.pid, row.body))

    run_available_now(stream(spark, endpoint, url, numPartitions="2", maxMessagesPerBatch="12"), sink, tmp_path / "ck")

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


def test_a_running_stream_acknowledges_each_batch_soon_after_its_commit(
        spark: Any, endpoint: str, spark_sqs: Any, make_spark_queue: Any, tmp_path: Path) -> None:
    url = make_spark_queue("continuous")
    seen: list[str] = []
    lock = threading.Lock()

    def sink(df: Any, batch_id: int) -> None:
        with lock:
            seen.extend(r.body for r in df.collect())

    query = stream(spark, endpoint, url, waitTimeSeconds="1").writeStream.foreachBatch(sink) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start()
    try:
        send(spark_sqs, url, [f"c{i}" for i in range(7)])
        wait_for(lambda: len(seen) >= 7, "the stream to see the messages")
        wait_for(lambda: visible_and_in_flight(spark_sqs, url) == (0, 0), "the batch to be deleted", timeout=10)
        send(spark_sqs, url, [f"d{i}" for i in range(3)])
        wait_for(lambda: visible_and_in_flight(spark_sqs, url) == (0, 0) and len(seen) >= 10, "the second batch")
    finally:
        query.stop()
    assert sorted(seen) == sorted([f"c{i}" for i in range(7)] + [f"d{i}" for i in range(3)])
