"""spark.read.format("queueserver"): the non-destructive browse, the receive mode, and consume()."""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.spark import SqsTarget, load, send
from support.sqs import visible_and_in_flight

pytestmark = pytest.mark.spark


def read(spark: Any, target: SqsTarget, url: str, **options: str) -> Any:
    return load(spark.read, target, url, **options)


@pytest.mark.spark_modes("local")
def test_a_browse_returns_the_same_rows_twice_and_receives_nothing(spark: Any, target: SqsTarget, spark_sqs: Any,
                                                                    make_spark_queue: Any) -> None:
    url = make_spark_queue("browse")
    send(spark_sqs, url, [f'{{"n": {i}}}' for i in range(1205)])  # more than one page of 1000
    df = read(spark, target, url)

    first = sorted((r.message_id, r.body, r.receive_count, r.state) for r in df.collect())
    second = sorted((r.message_id, r.body, r.receive_count, r.state) for r in df.collect())
    assert first == second and len(first) == 1205
    assert {(count, state) for _, _, count, state in first} == {(0, "visible")}
    assert visible_and_in_flight(spark_sqs, url) == (1205, 0)  # nothing received, nothing hidden
    assert df.selectExpr("sum(get_json_object(body, '$.n'))").first()[0] == sum(range(1205))


@pytest.mark.spark_modes("local", "connect")
def test_a_dead_letter_queue_can_be_analysed_again_and_again(spark: Any, target: SqsTarget, spark_sqs: Any,
                                                              make_spark_queue: Any) -> None:
    url = make_spark_queue("poisoned", dead_letter_after=1)
    dlq = make_spark_queue.dead_letters[url]
    send(spark_sqs, url, ["bad-1", "bad-2"])
    for _ in range(2):  # receive once without deleting, then once more: the redrive moves them
        spark_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert visible_and_in_flight(spark_sqs, dlq) == (2, 0)
    source_arn = spark_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    for _ in range(2):
        rows = read(spark, target, dlq).select("body", "dead_letter_source_arn", "receive_count").collect()
        assert sorted((r.body, r.dead_letter_source_arn) for r in rows) == [("bad-1", source_arn), ("bad-2", source_arn)]
    assert visible_and_in_flight(spark_sqs, dlq) == (2, 0)


@pytest.mark.spark_modes("local")
def test_browse_can_be_capped_and_sees_messages_in_flight(spark: Any, target: SqsTarget, spark_sqs: Any,
                                                         make_spark_queue: Any) -> None:
    url = make_spark_queue("browse-cap")
    send(spark_sqs, url, [f"b{i}" for i in range(30)])
    spark_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)
    rows = read(spark, target, url, maxMessages="25").collect()
    assert len(rows) == 25
    assert sorted({r.state for r in read(spark, target, url).collect()}) == ["in_flight", "visible"]


@pytest.mark.spark_modes("local", "cluster")
def test_the_receive_mode_hides_what_it_read_and_gives_receipt_handles(spark: Any, target: SqsTarget, spark_sqs: Any,
                                                                     make_spark_queue: Any) -> None:
    url = make_spark_queue("receive-mode")
    send(spark_sqs, url, [f"r{i}" for i in range(23)])
    rows = read(spark, target, url, mode="receive", visibilityTimeout="300", numPartitions="2",
                waitTimeSeconds="0").collect()
    assert sorted(r.body for r in rows) == sorted(f"r{i}" for i in range(23))
    assert all(r.receipt_handle and r.receive_count == 1 for r in rows)
    assert visible_and_in_flight(spark_sqs, url) == (0, 23)


@pytest.mark.spark_modes("local", "connect")
def test_consume_deletes_only_if_the_function_returned(
        spark: Any, target: SqsTarget, spark_sqs: Any, make_spark_queue: Any) -> None:
    from queueserver.spark import consume

    url = make_spark_queue("consume")
    send(spark_sqs, url, [f"c{i}" for i in range(15)])

    def fails(df: Any) -> None:
        assert df.count() == 15
        raise ValueError("the job failed")

    with pytest.raises(ValueError, match="the job failed"):
        consume(spark, target.endpoint, url, fails, wait_time_seconds=0, **target.signing_options())
    assert visible_and_in_flight(spark_sqs, url) == (15, 0)  # released, not deleted

    stolen: list[Any] = []

    def slow(df: Any) -> int:
        total = df.count()
        deadline = time.monotonic() + 8  # twice the visibility timeout: the heartbeat must hold them
        while time.monotonic() < deadline:
            stolen.extend(spark_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))
            time.sleep(0.2)
        assert df.count() == total  # the checkpointed DataFrame does not receive again
        return total

    result = consume(spark, target.endpoint, url, slow, visibility_timeout=4, wait_time_seconds=0,
                     **target.signing_options())
    assert (result.messages, result.deleted, result.result) == (15, 15, 15)
    assert stolen == []
    assert visible_and_in_flight(spark_sqs, url) == (0, 0)
