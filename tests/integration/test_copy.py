"""`queueserver copy --from URL --to URL`: a queue's messages moved to another queueserver, and to another
SQS (moto's server stands in for AWS SQS), with their attributes, group and deduplication ids."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clients import json_client
from support.moto import moto_server
from support.server import Server, run_queueserver, start_server
from support.sqs import unique_queue_name

pytestmark = pytest.mark.server_process

ATTRIBUTES = {"kind": {"DataType": "String", "StringValue": "invoice"},
              "amount": {"DataType": "Number.euros", "StringValue": "12.50"},
              "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"}}
TRACE = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793"}}


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    folder = tmp_path_factory.mktemp("copy")
    source, destination = start_server(folder / "source.db"), start_server(folder / "destination.db")
    yield source, destination
    source.stop()
    destination.stop()


def copy(source_url: str, destination_url: str, *options: str) -> dict[str, Any]:
    done = run_queueserver("copy", "--from", source_url, "--to", destination_url, "--wait", "0", "--json", *options)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def everything(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Receive the whole queue (in order, for a FIFO queue), deleting nothing."""
    found: list[dict[str, Any]] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                          MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
                                          ).get("Messages", []):
        found += messages
        if url.endswith(".fifo"):  # a group's next message only after this one is deleted
            sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                            for i, m in enumerate(messages)])
    return found


def fill(sqs: Any, fifo: bool, count: int) -> str:
    name = unique_queue_name("copy") + (".fifo" if fifo else "")
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"]
    for n in range(count):
        extra: dict[str, Any] = {"MessageGroupId": f"group-{n % 3}", "MessageDeduplicationId": f"dedup-{n}"} \
            if fifo else {}
        sqs.send_message(QueueUrl=url, MessageBody=f"message {n}", MessageAttributes=ATTRIBUTES,
                         MessageSystemAttributes=TRACE, **extra)
    return url


def empty_queue(sqs: Any, fifo: bool) -> str:
    name = unique_queue_name("copied") + (".fifo" if fifo else "")
    return str(sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"])


def check_copied(messages: list[dict[str, Any]], count: int, fifo: bool, trace: bool = True) -> None:
    assert sorted(m["Body"] for m in messages) == sorted(f"message {n}" for n in range(count))
    for m in messages:
        assert m["MessageAttributes"] == ATTRIBUTES
        if trace:
            assert m["Attributes"]["AWSTraceHeader"] == TRACE["AWSTraceHeader"]["StringValue"]
    if fifo:
        n_of = {m["Body"]: int(m["Body"].split()[1]) for m in messages}
        for group in range(3):  # each group in the order it was sent, with its ids
            in_group = [m for m in messages if m["Attributes"]["MessageGroupId"] == f"group-{group}"]
            assert [n_of[m["Body"]] for m in in_group] == [n for n in range(count) if n % 3 == group]
            assert all(m["Attributes"]["MessageDeduplicationId"] == f"dedup-{n_of[m['Body']]}" for m in in_group)


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_copy_moves_every_message_with_its_attributes_to_another_queueserver_and_empties_the_source(
        two_servers: tuple[Server, Server], fifo: bool) -> None:
    source_sqs, destination_sqs = (json_client(s.endpoint) for s in two_servers)
    source_url, destination_url = fill(source_sqs, fifo, 25), empty_queue(destination_sqs, fifo)
    assert copy(source_url, destination_url) == {"copied": 25, "refused": 0, "not_deleted": 0,
                                                  "from": source_url, "to": destination_url}
    check_copied(everything(destination_sqs, destination_url), 25, fifo)
    attributes = source_sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_copy_moves_a_queueservers_messages_to_another_sqs_implementation(
        two_servers: tuple[Server, Server], tmp_path: Path, fifo: bool) -> None:
    source_sqs = json_client(two_servers[0].endpoint)
    source_url = fill(source_sqs, fifo, 12)
    with moto_server(tmp_path) as moto:
        moto_sqs = json_client(moto.endpoint)
        destination_url = empty_queue(moto_sqs, fifo)
        assert copy(source_url, destination_url)["copied"] == 12
        # moto's SendMessageBatch drops MessageSystemAttributes (its SendMessage and AWS keep them)
        check_copied(everything(moto_sqs, destination_url), 12, fifo, trace=False)


def test_copy_stops_at_max_and_leaves_the_rest_in_the_source(two_servers: tuple[Server, Server]) -> None:
    source_sqs, destination_sqs = (json_client(s.endpoint) for s in two_servers)
    source_url, destination_url = fill(source_sqs, False, 15), empty_queue(destination_sqs, False)
    assert copy(source_url, destination_url, "--max", "7")["copied"] == 7
    assert len(everything(destination_sqs, destination_url)) == 7
    assert len(everything(source_sqs, source_url)) == 8


def test_copy_into_a_fifo_queue_needs_a_group_for_messages_without_one(two_servers: tuple[Server, Server]) -> None:
    source_sqs, destination_sqs = (json_client(s.endpoint) for s in two_servers)
    source_url, destination_url = fill(source_sqs, False, 3), empty_queue(destination_sqs, True)
    refused = run_queueserver("copy", "--from", source_url, "--to", destination_url, "--wait", "0")
    assert refused.returncode == 2 and "give --group-id" in refused.stderr, refused.stderr
    copied = copy(source_url, destination_url, "--group-id", "imported")  # the refused run released them
    assert copied["copied"] == 3
    assert {m["Attributes"]["MessageGroupId"] for m in everything(destination_sqs, destination_url)} == {"imported"}


def test_copy_to_a_queue_that_does_not_exist_receives_nothing_from_the_source(
        two_servers: tuple[Server, Server]) -> None:
    source_sqs = json_client(two_servers[0].endpoint)
    source_url = fill(source_sqs, False, 2)
    missing = f"{two_servers[1].endpoint}/000000000000/no-such-queue"
    done = run_queueserver("copy", "--from", source_url, "--to", missing)
    assert done.returncode == 4, done.stderr
    attributes = source_sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "2" and attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_copy_refuses_what_is_not_a_queue_url(two_servers: tuple[Server, Server]) -> None:
    done = run_queueserver("copy", "--from", two_servers[0].endpoint, "--to", "s3://bucket/x")
    assert done.returncode == 2 and "expected a queue URL" in done.stderr, done.stderr
