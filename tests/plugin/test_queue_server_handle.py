"""queueserver.testing.QueueServer, used without pytest's fixtures: every method on a real server."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from botocore.exceptions import ClientError

from queueserver.testing import QueueServer, QueueServerError


@pytest.fixture(scope="module")
def qs() -> QueueServer:
    with QueueServer() as server:
        yield server


def test_a_started_server_answers_on_its_endpoint_and_stores_its_file_where_it_says(qs: QueueServer) -> None:
    assert qs.endpoint.startswith("http://127.0.0.1:")
    assert qs.client().list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert qs.db_path.exists()


def test_create_queue_writes_ints_bools_and_dicts_as_sqs_attribute_strings(qs: QueueServer) -> None:
    dlq = qs.create_queue("handle-dlq")
    dlq_arn = qs.client().get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = qs.create_queue("handle-attrs", VisibilityTimeout=45, SqsManagedSseEnabled=False,
                          RedrivePolicy={"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3},
                          tags={"team": "shop"})
    attributes = qs.client().get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["VisibilityTimeout"] == "45"
    assert attributes["SqsManagedSseEnabled"] == "false"
    assert json.loads(attributes["RedrivePolicy"]) == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}
    assert qs.client().list_queue_tags(QueueUrl=url)["Tags"] == {"team": "shop"}
    fifo = qs.create_queue("handle-order.fifo")
    assert qs.client().get_queue_attributes(QueueUrl=fifo, AttributeNames=["FifoQueue"])["Attributes"] == {
        "FifoQueue": "true"}


def test_messages_and_counts_look_without_receiving(qs: QueueServer) -> None:
    url = qs.create_queue("handle-look")
    sqs = qs.client()
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    assert qs.counts("handle-look") == {"visible": 2, "in_flight": 1, "delayed": 1}
    looked = qs.messages(url)
    assert [m["Body"] for m in looked] == ["m0", "m1", "m2", "later"]
    assert {m["Body"]: m["State"] for m in looked}[received[0]["Body"]] == "in_flight"
    assert qs.counts(url) == {"visible": 2, "in_flight": 1, "delayed": 1}  # looking moved nothing


def test_messages_pages_through_a_queue_longer_than_one_browse_page(qs: QueueServer) -> None:
    url = qs.create_queue("handle-long")
    sqs = qs.client()
    for start in range(0, 1010, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": str(start + n)} for n in range(10)])
    assert [m["Body"] for m in qs.messages(url)] == [str(n) for n in range(1010)]


def test_advance_moves_the_servers_clock_and_visibility_with_it(qs: QueueServer) -> None:
    url = qs.create_queue("handle-clock", VisibilityTimeout=43200)
    sqs = qs.client()
    sqs.send_message(QueueUrl=url, MessageBody="twelve hours")
    sqs.receive_message(QueueUrl=url)
    before = qs.now
    assert qs.advance(43199) == pytest.approx(before + 43199)
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
    qs.advance(2)
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url)["Messages"]] == ["twelve hours"]
    assert qs.now_ms == round((before + 43201) * 1000)


def test_clients_of_another_region_see_that_regions_queues(qs: QueueServer) -> None:
    qs.create_queue("handle-regional", region="eu-west-1")
    assert any(u.endswith("/handle-regional") for u in qs.client("eu-west-1").list_queues()["QueueUrls"])
    assert not any(u.endswith("/handle-regional")
                   for u in qs.client().list_queues(QueueNamePrefix="handle-regional").get("QueueUrls", []))


def test_env_points_a_subprocess_using_boto3_at_this_server(qs: QueueServer) -> None:
    qs.create_queue("handle-env")
    code = "import boto3; print(boto3.client('sqs').get_queue_url(QueueName='handle-env')['QueueUrl'])"
    out = subprocess.run([sys.executable, "-c", code], env={**qs.env, "PATH": ""}, capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == qs.queue_url("handle-env")


def test_call_reaches_actions_boto3_does_not_know_and_reports_errors(qs: QueueServer) -> None:
    url = qs.create_queue("handle-call")
    assert qs.call("QueueserverBrowseMessages", {"QueueUrl": url}) == {"Messages": []}
    with pytest.raises(QueueServerError, match="400"):
        qs.call("QueueserverBrowseMessages", {"QueueUrl": url + "-missing"})


def test_wait_for_returns_the_first_true_value_and_times_out_with_a_message(qs: QueueServer) -> None:
    values = iter([0, "", "found"])
    assert qs.wait_for(lambda: next(values), timeout=5) == "found"
    with pytest.raises(TimeoutError, match="still false"):
        qs.wait_for(lambda: False, timeout=0.1)


def test_restart_keeps_the_file_the_port_the_messages_and_the_clock_to_the_millisecond() -> None:
    with QueueServer() as qs:
        url = qs.create_queue("restart-me")
        qs.client().send_message(QueueUrl=url, MessageBody="kept")
        endpoint = qs.endpoint
        qs.advance(3600)
        moved = qs.now_ms
        qs.restart()
        assert qs.endpoint == endpoint
        assert qs.now_ms == moved
        assert [m["Body"] for m in qs.messages(url)] == ["kept"]


def test_crash_keeps_every_acknowledged_send_the_in_flight_state_and_the_clock_to_the_millisecond() -> None:
    with QueueServer() as qs:
        url = qs.create_queue("crash-me", VisibilityTimeout=600)
        sqs = qs.client()
        for n in range(20):
            sqs.send_message(QueueUrl=url, MessageBody=str(n))
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=5)
        stood = qs.now_ms
        qs.crash()
        assert qs.running
        assert qs.now_ms == stood
        assert qs.counts(url) == {"visible": 15, "in_flight": 5, "delayed": 0}
        qs.advance(600)
        assert qs.counts(url) == {"visible": 20, "in_flight": 0, "delayed": 0}


def test_a_crash_after_real_time_passed_leaves_the_clock_and_the_visibility_where_they_stood() -> None:
    """Six seconds of real time against a five-second visibility: only the test moves the clock."""
    with QueueServer() as qs:
        url = qs.create_queue("real-time-passes", VisibilityTimeout=5)
        sqs = qs.client()
        sqs.send_message(QueueUrl=url, MessageBody="held")
        assert [m["Body"] for m in sqs.receive_message(QueueUrl=url)["Messages"]] == ["held"]
        stood = qs.now_ms
        time.sleep(6)  # real time passing is what this test is about
        qs.crash()
        assert qs.now_ms == stood
        assert qs.counts(url) == {"visible": 0, "in_flight": 1, "delayed": 0}
        qs.advance(4.999)
        assert qs.counts(url) == {"visible": 0, "in_flight": 1, "delayed": 0}
        qs.advance(0.001)
        assert qs.counts(url) == {"visible": 1, "in_flight": 0, "delayed": 0}


def test_stop_is_clean_and_start_brings_the_same_server_back_with_its_clock() -> None:
    with QueueServer() as qs:
        url = qs.create_queue("stop-me")
        qs.advance(90)
        stood = qs.now_ms
        assert qs.stop() == 0
        assert not qs.running
        with pytest.raises(Exception):
            qs.client(config=_no_retries()).list_queues()
        qs.start()
        assert qs.client().get_queue_url(QueueName="stop-me")["QueueUrl"] == url
        assert qs.now_ms == stood


def test_a_server_on_the_real_clock_in_between_lets_the_test_clock_start_again_at_the_wall_clock(
        tmp_path) -> None:
    """Its messages carry wall-clock timestamps: a manual clock resumed behind them would see them ahead."""
    db = tmp_path / "both.db"
    with QueueServer(db) as qs:
        qs.advance(3 * 86400)
        ahead = qs.now_ms
    with QueueServer(db, test_clock=False):
        pass
    before = time.time_ns() // 1_000_000
    with QueueServer(db) as qs:
        after = time.time_ns() // 1_000_000
        assert before <= qs.now_ms <= after < ahead


def test_closing_removes_the_temporary_folder_but_keep_files_leaves_it() -> None:
    qs = QueueServer().start()
    folder = qs.db_path.parent
    qs.close()
    assert not folder.exists()
    kept = QueueServer().start()
    kept.keep_files = True
    kept.close()
    assert kept.db_path.exists()
    QueueServer(kept.db_path).close()  # a given path is never removed
    assert kept.db_path.exists()


def test_a_server_that_cannot_start_raises_with_its_log(tmp_path) -> None:
    not_a_database = tmp_path / "junk.db"
    not_a_database.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(QueueServerError, match="did not start"):
        QueueServer(not_a_database).start()


def test_advance_on_a_server_without_the_test_clock_says_how_to_turn_it_on() -> None:
    with QueueServer(test_clock=False) as qs:
        with pytest.raises(QueueServerError, match="test_clock=True"):
            qs.advance(1)


def test_errors_from_boto3_clients_are_the_servers_own(qs: QueueServer) -> None:
    with pytest.raises(ClientError) as raised:
        qs.client().get_queue_url(QueueName="no-such-queue")
    assert raised.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def _no_retries():
    from botocore.config import Config

    return Config(retries={"total_max_attempts": 1}, connect_timeout=1)
