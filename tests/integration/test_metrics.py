"""GET /metrics after a known workload: every counter and gauge against what was done.

Each test runs its own server (a fresh database, the manual clock, exact counts) so that the
server-wide figures are this test's alone, over both wire protocols. The exposition is read with
prometheus-client's own parser.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.metrics import Scrape, get, scrape, wait_for
from support.server import ClockControl
from support.wire import raw_request

pytestmark = pytest.mark.server_process

ACCOUNT = "000000000000"


def outcome(status: int) -> str:
    return "success" if status < 400 else "client_error" if status < 500 else "server_error"


def record_calls(client: Any, calls: Counter) -> Any:
    """Count every answered call by (action, outcome), as the server should."""
    def after_call(http_response: Any, model: Any, **_: Any) -> None:
        calls[(model.name, outcome(http_response.status_code))] += 1

    client.meta.events.register("after-call.sqs", after_call)
    return client


def arn(name: str, region: str = "us-east-1") -> str:
    return f"arn:aws:sqs:{region}:{ACCOUNT}:{name}"


def assert_histogram_is_whole(result: Scrape, name: str, **labels: str) -> None:
    buckets = list(result.buckets(name, **labels).values())
    assert buckets == sorted(buckets), f"{name} buckets are not cumulative: {buckets}"
    assert buckets[-1] == result.value(f"{name}_count", **labels)


def test_a_scrape_after_a_known_workload_shows_exactly_what_was_done(server_factory, make_client, tmp_path):
    db = tmp_path / "metrics.db"
    server = server_factory(db, "--test-clock", "--counts-max-age", "0")
    calls: Counter = Counter()
    sqs = record_calls(make_client(server.endpoint), calls)
    work = sqs.create_queue(QueueName="work")["QueueUrl"]
    empty = sqs.create_queue(QueueName="empty")["QueueUrl"]
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    source = sqs.create_queue(QueueName="source", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn("dlq"), "maxReceiveCount": "1"})})["QueueUrl"]
    gone = sqs.create_queue(QueueName="gone")["QueueUrl"]

    # Sent: sizes are body + attribute name, type and value (as SQS counts a message's size).
    for body in ("a" * 10, "b" * 100, "c" * 1000, "d" * 5000):
        sqs.send_message(QueueUrl=work, MessageBody=body)
    sqs.send_message(QueueUrl=work, MessageBody="e" * 20,
                     MessageAttributes={"k": {"DataType": "String", "StringValue": "vvv"}})  # 20 + 1 + 6 + 3
    batch = sqs.send_message_batch(QueueUrl=work, Entries=[
        {"Id": str(i), "MessageBody": "g" * 50} for i in range(3)])
    assert len(batch["Successful"]) == 3
    sqs.send_message(QueueUrl=work, MessageBody="f" * 40, DelaySeconds=900)
    sizes = [10, 100, 1000, 5000, 30, 50, 50, 50, 40]

    # Received, deleted (a repeated delete counts again, as in CloudWatch), empty receives.
    received = []
    for _ in range(2):
        received += sqs.receive_message(QueueUrl=work, MaxNumberOfMessages=3, VisibilityTimeout=900)["Messages"]
    assert len(received) == 6
    sqs.delete_message(QueueUrl=work, ReceiptHandle=received[0]["ReceiptHandle"])
    sqs.delete_message(QueueUrl=work, ReceiptHandle=received[0]["ReceiptHandle"])
    sqs.delete_message_batch(QueueUrl=work, Entries=[
        {"Id": "1", "ReceiptHandle": received[1]["ReceiptHandle"]},
        {"Id": "2", "ReceiptHandle": received[2]["ReceiptHandle"]}])
    for _ in range(2):
        assert "Messages" not in sqs.receive_message(QueueUrl=empty)

    # A dead-letter move: past maxReceiveCount the next receive moves the message instead.
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    assert len(sqs.receive_message(QueueUrl=source, VisibilityTimeout=0)["Messages"]) == 1
    assert "Messages" not in sqs.receive_message(QueueUrl=source)

    # A queue in another region is labelled with it; a deleted queue's series are gone; an error is counted.
    elsewhere = record_calls(make_client(server.endpoint, region="eu-west-1"), calls)
    west = elsewhere.create_queue(QueueName="work")["QueueUrl"]
    elsewhere.send_message(QueueUrl=west, MessageBody="hello")
    sqs.send_message(QueueUrl=gone, MessageBody="x")
    sqs.delete_queue(QueueUrl=gone)
    with pytest.raises(ClientError):
        sqs.get_queue_url(QueueName="no-such-queue")

    ClockControl(server.endpoint).advance(120)
    result = scrape(server.endpoint)

    expected = {  # queue: (sent, received, deleted, empty receives, dead-letter moves, visible, in flight, delayed, age)
        "work": (9, 6, 4, 0, 0, 2, 3, 1, 120.0),
        "empty": (0, 0, 0, 2, 0, 0, 0, 0, 0.0),
        "source": (1, 1, 0, 1, 1, 0, 0, 0, 0.0),
        "dlq": (0, 0, 0, 0, 0, 1, 0, 0, 120.0),  # a standard DLQ keeps the message's enqueue time
    }
    names = ("queueserver_messages_sent_total", "queueserver_messages_received_total",
             "queueserver_messages_deleted_total", "queueserver_empty_receives_total",
             "queueserver_dead_letter_moves_total", "queueserver_approximate_messages_visible",
             "queueserver_approximate_messages_not_visible", "queueserver_approximate_messages_delayed",
             "queueserver_approximate_age_of_oldest_message_seconds")
    for queue, values in expected.items():
        assert {name: result.queue(name, queue) for name in names} == dict(zip(names, values)), queue
    assert result.queue("queueserver_messages_sent_total", "work", region="eu-west-1") == 1
    assert result.queue("queueserver_approximate_messages_visible", "work", region="eu-west-1") == 1
    assert not any(("queue", "gone") in labels for labels in result.labelled("queueserver_messages_sent_total"))

    work_labels = {"queue": "work", "region": "us-east-1", "account": ACCOUNT}
    buckets = result.buckets("queueserver_sent_message_size_bytes", **work_labels)
    assert buckets == {bound: sum(1 for s in sizes if s <= bound) for bound in buckets}
    assert result.value("queueserver_sent_message_size_bytes_sum", **work_labels) == sum(sizes)
    assert result.value("queueserver_sent_message_size_bytes_count", **work_labels) == len(sizes)

    # Requests by action and outcome: exactly the calls the clients made, each timed once.
    requests = {(dict(labels)["action"], dict(labels)["outcome"]): value
                for labels, value in result.labelled("queueserver_requests_total").items()}
    assert requests == dict(calls)
    assert ("GetQueueUrl", "client_error") in requests
    for action, result_label in requests:
        labels = {"action": action, "outcome": result_label}
        assert result.value("queueserver_request_duration_seconds_count", **labels) == requests[(action, result_label)]
        assert_histogram_is_whole(result, "queueserver_request_duration_seconds", **labels)

    # The storage: every write went through a commit group and an fsync; the files' sizes as on disk.
    writes = sum(n for (action, _), n in calls.items() if action.startswith(("Send", "Receive", "Delete")))
    assert result.value("queueserver_commit_group_operations_sum") >= writes
    assert_histogram_is_whole(result, "queueserver_commit_group_operations")
    assert 1 <= result.value("queueserver_fsync_duration_seconds_count") <= result.value(
        "queueserver_commit_group_operations_count")
    assert_histogram_is_whole(result, "queueserver_fsync_duration_seconds")
    assert result.value("queueserver_database_size_bytes") == os.path.getsize(db)
    assert result.value("queueserver_wal_size_bytes") == os.path.getsize(f"{db}-wal")
    assert result.value("queueserver_storage_outages_total") == 0
    assert result.value("queueserver_fsync_failures_total") == 0
    assert result.value("queueserver_ready") == 1
    assert result.value("queueserver_open_long_polls") == 0
    assert result.value("queueserver_move_tasks_running") == 0


def test_open_long_polls_are_counted_while_they_wait(server_factory, make_client, tmp_path):
    server = server_factory(tmp_path / "polls.db")
    sqs = make_client(server.endpoint)
    url = sqs.create_queue(QueueName="polled")["QueueUrl"]
    answers: list[Any] = []
    pollers = [threading.Thread(target=lambda: answers.append(
        sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20).get("Messages", []))) for _ in range(2)]
    for poller in pollers:
        poller.start()
    wait_for(lambda: scrape(server.endpoint).value("queueserver_open_long_polls") == 2, "two open long polls")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "one"}, {"Id": "2", "MessageBody": "two"}])
    for poller in pollers:
        poller.join(30)
    assert sorted(len(a) for a in answers) in ([1, 1], [0, 2]) and sum(len(a) for a in answers) == 2
    result = scrape(server.endpoint)
    assert result.value("queueserver_open_long_polls") == 0
    assert result.queue("queueserver_messages_received_total", "polled") == 2


def test_a_running_move_task_shows_its_progress_and_its_moves_are_counted(server_factory, make_client, tmp_path):
    server = server_factory(tmp_path / "moves.db")
    sqs = make_client(server.endpoint)
    dlq = sqs.create_queue(QueueName="moves-dlq")["QueueUrl"]
    sqs.create_queue(QueueName="moves", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn("moves-dlq"), "maxReceiveCount": "3"})})
    for i in range(3):
        sqs.send_message(QueueUrl=dlq, MessageBody=f"m{i}")
    sqs.start_message_move_task(SourceArn=arn("moves-dlq"), DestinationArn=arn("moves"),
                                MaxNumberOfMessagesPerSecond=1)
    running = scrape(server.endpoint)  # one message a second: the task runs for about 3 s
    assert running.value("queueserver_move_tasks_running") == 1
    assert running.queue("queueserver_move_task_progress_total", "moves-dlq") == 3
    assert 0 <= running.queue("queueserver_move_task_progress_moved", "moves-dlq") < 3

    def completed() -> bool:
        latest = sqs.list_message_move_tasks(SourceArn=arn("moves-dlq"), MaxResults=1)["Results"]
        return latest[0]["Status"] == "COMPLETED"

    wait_for(completed, "the move task completed", timeout=20, interval=0.2)
    done = scrape(server.endpoint)
    assert done.value("queueserver_move_tasks_running") == 0
    assert done.labelled("queueserver_move_task_progress_moved") == {}
    assert done.value("queueserver_move_task_messages_moved_total") == 3
    assert done.queue("queueserver_approximate_messages_visible", "moves") == 3
    assert done.queue("queueserver_messages_sent_total", "moves") == 0, "a moved message is not a send"


def test_health_answers_and_metrics_refuse_a_web_page_from_another_origin(server):
    status, _, body = get(server.endpoint, "/health")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    status, _, body = get(server.endpoint, "/metrics", headers={"Origin": "https://evil.example"})
    assert status == 403 and b"queueserver_" not in body
    # Another method on these paths is an SQS request, answered as on any other path.
    for path in ("/metrics", "/health", "/ready"):
        response = raw_request(server.endpoint, b"{}", target="AmazonSQS.NoSuchAction", path=path)
        assert response.status == 400 and "UnknownOperation" in response.json()["__type"], response.body


def test_a_fifo_duplicate_is_answered_but_not_counted_as_sent(server_factory, make_client, tmp_path, queue_name):
    server = server_factory(tmp_path / "fifo.db")  # its queue among the first listed one by one
    sqs = make_client(server.endpoint)
    url = sqs.create_queue(QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for _ in range(2):
        sqs.send_message(QueueUrl=url, MessageBody="once", MessageGroupId="g", MessageDeduplicationId="d")
    result = scrape(server.endpoint)
    assert result.queue("queueserver_messages_sent_total", f"{queue_name}.fifo") == 1
    assert result.queue("queueserver_sent_message_size_bytes_count", f"{queue_name}.fifo") == 1
    assert result.queue("queueserver_approximate_messages_visible", f"{queue_name}.fifo") == 1


def test_past_the_first_queues_created_every_queue_is_summed_under_one_label(server_factory, make_client, tmp_path):
    server = server_factory(tmp_path / "capped.db", "--test-clock", "--counts-max-age", "0",
                            "--metrics-max-queues", "5")
    sqs = make_client(server.endpoint)
    urls = {f"q{i:02d}": sqs.create_queue(QueueName=f"q{i:02d}")["QueueUrl"] for i in range(20)}
    sqs.delete_queue(QueueUrl=urls.pop("q03"))  # q05 takes its place among the first five
    urls["a-late"] = sqs.create_queue(QueueName="a-late")["QueueUrl"]  # first by name, last created
    sqs.send_message(QueueUrl=urls["q02"], MessageBody="listed")
    for name, bodies in (("q10", 3), ("q15", 2), ("a-late", 1)):
        for i in range(bodies):
            sqs.send_message(QueueUrl=urls[name], MessageBody="x" * (100 * (i + 1)))
    ClockControl(server.endpoint).advance(60)  # q10's and q15's messages are a minute old, a-late's is not
    sqs.send_message(QueueUrl=urls["q18"], MessageBody="later", DelaySeconds=600)
    assert len(sqs.receive_message(QueueUrl=urls["q15"], MaxNumberOfMessages=1, VisibilityTimeout=600)["Messages"]) == 1
    assert "Messages" not in sqs.receive_message(QueueUrl=urls["q11"])
    dlq_arn = arn("q19")
    sqs.set_queue_attributes(QueueUrl=urls["q10"], Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})})
    sqs.send_message_batch(QueueUrl=urls["q19"], Entries=[{"Id": str(i), "MessageBody": f"dead {i}"}
                                                          for i in range(10)])
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=arn("q11"), MaxNumberOfMessagesPerSecond=1)
    # (one message a second: running for ten seconds)

    result = scrape(server.endpoint)
    listed = {dict(labels)["queue"] for labels in result.labelled("queueserver_messages_sent_total")}
    assert listed == {"q00", "q01", "q02", "q04", "q05", "(other)"}
    other = {"queue": "(other)", "region": "", "account": ""}
    assert result.value("queueserver_messages_sent_total", **other) == 3 + 2 + 1 + 1 + 10
    assert result.value("queueserver_messages_received_total", **other) == 1
    assert result.value("queueserver_empty_receives_total", **other) == 1
    assert result.value("queueserver_sent_message_size_bytes_count", **other) == 17
    assert result.value("queueserver_sent_message_size_bytes_sum", **other) == \
        600 + 300 + 100 + len("later") + sum(len(f"dead {i}") for i in range(10))
    assert_histogram_is_whole(result, "queueserver_sent_message_size_bytes", **other)
    assert result.value("queueserver_approximate_messages_visible", **other) == 3 + 1 + 1 + 10  # q19 -> q11: both
    assert result.value("queueserver_approximate_messages_not_visible", **other) == 1
    assert result.value("queueserver_approximate_messages_delayed", **other) == 1
    assert result.value("queueserver_approximate_age_of_oldest_message_seconds", **other) == 60.0
    assert result.value("queueserver_move_tasks_running") == 1
    assert result.value("queueserver_move_task_progress_total", **other) == 10
    assert result.queue("queueserver_messages_sent_total", "q02") == 1
    assert result.queue("queueserver_approximate_messages_visible", "q02") == 1

    # However many queues follow, a scrape holds the same series.
    for i in range(20, 40):
        sqs.create_queue(QueueName=f"q{i:02d}")
    again = scrape(server.endpoint)
    assert set(again.samples) == set(result.samples)
