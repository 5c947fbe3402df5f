"""df.write / writeStream .format("queueserver"): one message per row, SendMessageBatch, failures reported by row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.spark import SqsTarget, load, send
from support.sqs import receive_and_delete_all, visible_and_in_flight

pytestmark = pytest.mark.spark


def drain(spark_sqs: Any, url: str) -> list[dict[str, Any]]:
    """Receive and delete everything on a queue (the test's own consumer)."""
    return receive_and_delete_all(spark_sqs, url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])


def writer(df: Any, target: SqsTarget, url: str, **options: str) -> Any:
    w = df.write.format("queueserver").option("queue", url).mode("append")
    for key, value in {**target.options(), **options}.items():
        w = w.option(key, value)
    return w


def test_a_batch_write_sends_every_row_once_with_its_attributes_and_delay(spark: Any, target: SqsTarget, spark_sqs: Any,
                                                                          make_spark_queue: Any) -> None:
    url = make_spark_queue("write")
    df = spark.range(45).selectExpr("concat('row-', id) as body", "map('n', cast(id as string)) as attrs",
                                    "if(id < 5, 600, 0) as delay").repartition(3)
    writer(df, target, url, attributesColumn="attrs", delaySecondsColumn="delay").save()

    listed = browse_all(spark_sqs, url)
    assert sorted(m["Body"] for m in listed) == sorted(f"row-{i}" for i in range(45))  # each row exactly once
    assert all(m["MessageAttributes"]["n"]["StringValue"] == m["Body"].split("-")[1] for m in listed)
    assert sorted(m["Body"] for m in listed if m["State"] == "delayed") == [f"row-{i}" for i in range(5)]


def browse_all(spark_sqs: Any, url: str) -> list[dict[str, Any]]:
    from queueserver.spark.connection import browse_page

    messages, token = browse_page(spark_sqs, url)
    assert token is None
    return messages


@pytest.mark.spark_modes("local")
def test_without_a_body_column_each_row_is_sent_as_json(spark: Any, target: SqsTarget, spark_sqs: Any,
                                                        make_spark_queue: Any) -> None:
    url = make_spark_queue("json-rows")
    df = spark.createDataFrame([(1, "a", [1, 2]), (2, "b", [])], "id int, name string, tags array<int>")
    writer(df, target, url).save()
    assert sorted((json.loads(m["Body"]) for m in drain(spark_sqs, url)), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a", "tags": [1, 2]}, {"id": 2, "name": "b", "tags": []}]


@pytest.mark.spark_modes("local")
def test_a_fifo_write_keeps_each_group_in_row_order(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any) -> None:
    url = make_spark_queue("write-fifo", fifo=True)  # no content-based deduplication: the writer makes the ids
    df = spark.range(30).selectExpr("concat(id % 3, ':', id) as body", "cast(id % 3 as string) as g").coalesce(1)
    writer(df, target, url, groupIdColumn="g").save()

    messages = drain(spark_sqs, url)
    assert len(messages) == 30
    for group in "012":
        ids = [int(m["Body"].split(":")[1]) for m in messages if m["Attributes"]["MessageGroupId"] == group]
        assert ids == sorted(ids) and len(ids) == 10

    with pytest.raises(Exception, match="groupIdColumn"):
        writer(df, target, url).save()


def test_a_fifo_task_spark_retries_sends_no_duplicates(
        target: SqsTarget, spark_sqs: Any, make_spark_queue: Any) -> None:
    from pyspark.sql import Row
    from pyspark.sql.types import StructType

    from queueserver.spark.options import WriteSettings
    from queueserver.spark.write import make_plan, send_rows

    url = make_spark_queue("retried-fifo", fifo=True)
    schema = StructType.fromDDL("body string, g string")
    plan = make_plan(WriteSettings.from_options({**target.options(), "queue": url, "groupIdColumn": "g"}),
                     schema, overwrite=False)
    rows = [Row(body=f"b{i}", g="one") for i in range(12)]
    first = send_rows(plan, iter(rows[:7]), partition=0)  # the attempt that died after 7 rows
    again = send_rows(plan, iter(rows), partition=0)  # Spark's retry of the same task
    assert (first.sent, again.sent, again.failed) == (7, 12, 0)
    assert [m["Body"] for m in drain(spark_sqs, url)] == [f"b{i}" for i in range(12)]


@pytest.mark.spark_modes("local")
def test_rows_the_queue_refuses_are_reported_by_row_and_the_others_are_sent_once(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any) -> None:
    url = make_spark_queue("refused")
    rows = [("ok-1",), (None,), ("bad \x00 character",), ("ok-2",), ("x" * 1_100_000,)]
    df = spark.createDataFrame(rows, "body string").coalesce(1)
    with pytest.raises(Exception) as raised:
        writer(df, target, url).save()
    text = str(raised.value)
    assert "3 of 5 row(s) were not sent" in text
    assert "row 1: InvalidRow" in text and "row 2: InvalidMessageContents" in text and "row 4: InvalidRow" in text
    assert sorted(m["Body"] for m in drain(spark_sqs, url)) == ["ok-1", "ok-2"]


@pytest.mark.spark_modes("local", "connect")
def test_a_stream_can_move_messages_from_one_queue_to_another(spark: Any, target: SqsTarget, spark_sqs: Any,
                                                               make_spark_queue: Any, tmp_path: Path) -> None:
    source, target_queue = make_spark_queue("stream-source"), make_spark_queue("stream-target")
    send(spark_sqs, source, [f"s{i}" for i in range(15)])  # two micro-batches
    query = (load(spark.readStream, target, source, maxMessagesPerBatch="10")
             .selectExpr("upper(body) as body", "map('from', message_id) as attrs")
             .writeStream.format("queueserver").options(**target.options()).option("queue", target_queue)
             .option("attributesColumn", "attrs").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert visible_and_in_flight(spark_sqs, source) == (0, 0)
    moved = drain(spark_sqs, target_queue)
    assert sorted(m["Body"] for m in moved) == sorted(f"S{i}" for i in range(15))
    assert len({m["MessageAttributes"]["from"]["StringValue"] for m in moved}) == 15
