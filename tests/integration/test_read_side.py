"""Counts and browse from the read side: exact for a small queue after every kind of change,
and browse pages complete and in send order while sends go on."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from support.server import wait_for
from support.sqs import Counts, counts, receive
from support.wire import raw_json_call


def browse(endpoint: str, queue_url: str, **members: Any) -> dict[str, Any]:
    response = raw_json_call(endpoint, "QueueserverBrowseMessages", {"QueueUrl": queue_url, **members})
    assert response.status == 200, response.body
    return response.json()


def test_counts_follow_sends_receives_deletes_visibility_ends_delays_and_expiry(sqs: Any, clock: Any,
                                                                               make_queue: Any) -> None:
    url = make_queue({"MessageRetentionPeriod": "600"})
    assert counts(sqs, url) == Counts(0, 0, 0)
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    assert counts(sqs, url) == Counts(3, 0, 1)
    first, second = receive(sqs, url, MaxNumberOfMessages=2, VisibilityTimeout=30)
    assert counts(sqs, url) == Counts(1, 2, 1)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert counts(sqs, url) == Counts(1, 1, 1)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=0)
    assert counts(sqs, url) == Counts(2, 0, 1)
    [third] = receive(sqs, url, MaxNumberOfMessages=1, VisibilityTimeout=30)
    assert counts(sqs, url) == Counts(1, 1, 1)
    clock.advance(30)
    assert counts(sqs, url) == Counts(2, 0, 1), "its visibility timeout ended"
    clock.advance(30)
    assert counts(sqs, url) == Counts(3, 0, 0), "its delay ended"
    clock.advance(600)
    assert counts(sqs, url) == Counts(0, 0, 0), "past the retention period"


def test_counts_after_a_purge_and_from_many_concurrent_callers_agree_with_the_queue(
        sqs: Any, server: Any, make_client: Any, make_queue: Any) -> None:
    url = make_queue()
    for start in range(0, 50, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"}
                                                      for i in range(start, start + 10)])
    receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=300)
    clients = [make_client(server.endpoint) for _ in range(8)]
    with ThreadPoolExecutor(len(clients)) as pool:
        seen = list(pool.map(lambda c: counts(c, url), clients * 4))
    assert set(seen) == {Counts(40, 10, 0)}
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_browse_pages_are_complete_and_in_send_order_while_messages_are_sent(
        sqs: Any, server: Any, make_client: Any, make_queue: Any) -> None:
    url = make_queue()
    for start in range(0, 300, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"a{i}"}
                                                      for i in range(start, start + 10)])
    sender = make_client(server.endpoint)
    failures: list[BaseException] = []

    def send_more() -> None:
        try:
            for i in range(200):
                sender.send_message(QueueUrl=url, MessageBody=f"b{i}")
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)

    thread = threading.Thread(target=send_more)
    thread.start()
    bodies: list[str] = []
    token: str | None = None
    try:
        while True:
            page = browse(server.endpoint, url, MaxNumberOfMessages=7, **({"NextToken": token} if token else {}))
            for message in page["Messages"]:
                bodies.append(message["Body"])
            token = page.get("NextToken")
            if token is None:
                break
            seen_b = [b for b in bodies if b.startswith("b")]
            assert seen_b == [f"b{i}" for i in range(len(seen_b))], "no concurrent send is skipped"
    finally:
        thread.join()
    assert not failures
    assert bodies[:300] == [f"a{i}" for i in range(300)]
    # What was sent after the last page was read comes on the pages after it.
    rest = browse(server.endpoint, url, MaxNumberOfMessages=1000)["Messages"]
    tail = [m["Body"] for m in rest][len(bodies):]
    assert bodies + tail == [f"a{i}" for i in range(300)] + [f"b{i}" for i in range(200)]


def test_counts_and_browse_follow_the_database_file_the_server_wrote_back_after_it_was_deleted(
        tmp_path: Any, serve_with_client: Any) -> None:
    db = tmp_path / "q.db"
    server, client = serve_with_client(db)
    url = client.create_queue(QueueName="restored")["QueueUrl"]
    for i in range(10):
        client.send_message(QueueUrl=url, MessageBody=f"before{i}")
    assert counts(client, url) == Counts(10, 0, 0)
    db.unlink()  # the -wal and -shm stay; the writer notices and writes the file back
    for i in range(10):
        client.send_message(QueueUrl=url, MessageBody=f"after{i}")
    wait_for(lambda: "is restored" in server.stderr_text(), "the file to be written back",
             detail=server.stderr_text)
    big = "x" * 200_000
    for _ in range(30):  # ~6 MB: past the write-ahead log's checkpoint, into the new file
        client.send_message(QueueUrl=url, MessageBody=big)
    client.send_message(QueueUrl=url, MessageBody="last")
    wait_for(lambda: counts(client, url) == Counts(51, 0, 0), "the counts to follow the written-back file",
             detail=lambda: f"the counts stayed at {counts(client, url)}")
    bodies = [m["Body"] for m in browse(server.endpoint, url, MaxNumberOfMessages=100)["Messages"]]
    assert bodies == [f"before{i}" for i in range(10)] + [f"after{i}" for i in range(10)] + [big] * 30 + ["last"]


def test_fifo_counts_follow_receives_retried_receives_and_visibility_ends(sqs: Any, clock: Any,
                                                                         make_queue: Any) -> None:
    url = make_queue({"FifoQueue": "true", "ContentBasedDeduplication": "true"},
                     name=f"counts-{uuid.uuid4().hex[:12]}.fifo")
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g")
    assert counts(sqs, url) == Counts(3, 0, 0)
    [first] = receive(sqs, url, MaxNumberOfMessages=1, VisibilityTimeout=30, ReceiveRequestAttemptId="a1")
    assert counts(sqs, url) == Counts(2, 1, 0)
    clock.advance(30)
    assert counts(sqs, url) == Counts(3, 0, 0), "its visibility timeout ended"
    [again] = receive(sqs, url, MaxNumberOfMessages=1, VisibilityTimeout=30, ReceiveRequestAttemptId="a1")
    assert again["MessageId"] == first["MessageId"]
    assert counts(sqs, url) == Counts(2, 1, 0), "the retried receive holds it again"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert counts(sqs, url) == Counts(2, 0, 0)


def test_reads_running_all_the_time_do_not_keep_the_write_ahead_log_from_being_checkpointed(
        tmp_path: Any, serve_with_client: Any, make_client: Any) -> None:
    db = tmp_path / "q.db"
    server, client = serve_with_client(db)
    url = client.create_queue(QueueName="busy")["QueueUrl"]
    stop = threading.Event()
    reads = [0]

    def read_forever() -> None:
        reader = make_client(server.endpoint)
        while not stop.is_set():
            counts(reader, url)
            browse(server.endpoint, url, MaxNumberOfMessages=10)
            reads[0] += 1

    thread = threading.Thread(target=read_forever)
    thread.start()
    try:
        big = "x" * 200_000
        for _ in range(60):  # 12 MB through the log; SQLite checkpoints it at every ~4 MB
            client.send_message(QueueUrl=url, MessageBody=big)
    finally:
        stop.set()
        thread.join()
    assert reads[0] > 10
    wal = db.with_name("q.db-wal").stat().st_size
    assert wal < 8_000_000, f"the write-ahead log grew to {wal:,} bytes: a reader kept it from being reused"
