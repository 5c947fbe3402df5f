"""`queueserver serve --config FILE`: queues declared in TOML, applied at start through the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.server import try_serve

pytestmark = pytest.mark.server_process

ORDERS = """
[queues.orders-dlq]
MessageRetentionPeriod = 1209600

[queues.orders]
VisibilityTimeout = 60
dead_letter_queue = "orders-dlq"
max_receive_count = 5
tags = { team = "shop" }

[queues."jobs.fifo"]
ContentBasedDeduplication = true

[queues.far-away]
region = "eu-west-1"
DelaySeconds = 4
"""


def _config(tmp_path: Path, text: str, name: str = "queueserver.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _attributes(sqs: Any, name: str) -> dict[str, str]:
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_the_queues_of_the_file_exist_at_start_with_their_attributes_tags_and_dead_letter_queue(
        tmp_path: Path, server_factory: Any, make_client: Any) -> None:
    server = server_factory(tmp_path / "q.db", "--config", _config(tmp_path, ORDERS))
    sqs = make_client(server.endpoint)
    orders = _attributes(sqs, "orders")
    assert orders["VisibilityTimeout"] == "60"
    assert json.loads(orders["RedrivePolicy"]) == {
        "deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:orders-dlq", "maxReceiveCount": 5}
    assert _attributes(sqs, "orders-dlq")["MessageRetentionPeriod"] == "1209600"
    jobs = _attributes(sqs, "jobs.fifo")
    assert (jobs["FifoQueue"], jobs["ContentBasedDeduplication"]) == ("true", "true")
    url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "shop"}
    dlq_url = sqs.get_queue_url(QueueName="orders-dlq")["QueueUrl"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"] == [url]
    assert "far-away" not in str(sqs.list_queues().get("QueueUrls"))
    far = make_client(server.endpoint, region="eu-west-1")
    far_url = far.get_queue_url(QueueName="far-away")["QueueUrl"]
    assert far_url.endswith("/queue/eu-west-1/000000000000/far-away")
    assert far.get_queue_attributes(QueueUrl=far_url, AttributeNames=["DelaySeconds", "QueueArn"])["Attributes"] == \
        {"DelaySeconds": "4", "QueueArn": "arn:aws:sqs:eu-west-1:000000000000:far-away"}
    server.stop()


def test_applying_again_is_idempotent_and_a_changed_attribute_is_updated_and_logged(
        tmp_path: Path, server_factory: Any, make_client: Any) -> None:
    db = tmp_path / "q.db"
    path = _config(tmp_path, ORDERS)
    first = server_factory(db, "--config", path)
    sqs = make_client(first.endpoint)
    url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    sqs.create_queue(QueueName="not-in-the-file", Attributes={"DelaySeconds": "7"})
    created = _attributes(sqs, "orders")["LastModifiedTimestamp"]
    first.stop()

    again = server_factory(db, "--config", path)
    sqs = make_client(again.endpoint)
    assert _attributes(sqs, "orders")["LastModifiedTimestamp"] == created
    assert _attributes(sqs, "orders")["ApproximateNumberOfMessages"] == "1"
    again.stop()
    assert "changed" not in again.stderr_text()

    changed = _config(tmp_path, ORDERS.replace("VisibilityTimeout = 60", "VisibilityTimeout = 90")
                      .replace('team = "shop"', 'team = "checkout"'), "changed.toml")
    third = server_factory(db, "--config", changed)
    sqs = make_client(third.endpoint)
    assert _attributes(sqs, "orders")["VisibilityTimeout"] == "90"
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "checkout"}
    assert _attributes(sqs, "not-in-the-file")["DelaySeconds"] == "7"
    assert _attributes(sqs, "orders")["ApproximateNumberOfMessages"] == "1"
    third.stop()
    log = third.stderr_text()
    assert "queue orders: VisibilityTimeout changed from '60' to '90'" in log
    assert "queue orders: tag team changed from 'shop' to 'checkout'" in log


def test_the_environment_beats_the_file_and_the_command_line_beats_both(
        tmp_path: Path, server_factory: Any, make_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _config(tmp_path, 'account_id = "111111111111"\n[queues.here]\n')
    from_file = server_factory(tmp_path / "a.db", "--config", path)
    assert make_client(from_file.endpoint).get_queue_url(QueueName="here")["QueueUrl"].endswith(
        "/111111111111/here")
    from_file.stop()
    monkeypatch.setenv("QUEUESERVER_ACCOUNT_ID", "222222222222")
    from_env = server_factory(tmp_path / "b.db", "--config", path)
    assert make_client(from_env.endpoint).get_queue_url(QueueName="here")["QueueUrl"].endswith(
        "/222222222222/here")
    from_env.stop()
    from_cli = server_factory(tmp_path / "c.db", "--config", path, "--account-id", "333333333333")
    assert make_client(from_cli.endpoint).get_queue_url(QueueName="here")["QueueUrl"].endswith(
        "/333333333333/here")
    from_cli.stop()


@pytest.mark.parametrize(("text", "named"), [
    ("[queues.good]\n[queues.orders]\nVisibilityTimeout = 50000\n",
     "key queues.orders.VisibilityTimeout: Invalid value for the parameter VisibilityTimeout."),
    ("[queues.good]\n[queues.orders]\ndead_letter_queue = \"nowhere\"\nmax_receive_count = 3\n",
     "key queues.orders.dead_letter_queue: no queue nowhere in the file or the database"),
    ("[queues.good]\n[queues.orders]\ndead_letter_queue = \"good\"\nmax_receive_count = 3\n"
     "[queues.\"f.fifo\"]\ndead_letter_queue = \"good\"\nmax_receive_count = 3\n",
     "key queues.f.fifo.dead_letter_queue: good must be of the same type as f.fifo"),
    ("[queues.good]\n[queues.\"bad name\"]\n", "key queues.bad name: bad queue name"),
    ("[queues.good]\n[queues.orders]\nFifoThroughputLimit = \"perQueue\"\n",
     "key queues.orders.FifoThroughputLimit: You can specify the FifoThroughputLimit only when FifoQueue"),
    ("[queues.good]\nmax_connections = 5\n", "key queues.good.max_connections: unknown key"),
])
def test_a_bad_file_stops_the_start_with_one_line_naming_the_key_and_changes_nothing(
        tmp_path: Path, server_factory: Any, make_client: Any, text: str, named: str) -> None:
    db = tmp_path / "q.db"
    refusal = try_serve(db, "--config", _config(tmp_path, text))
    assert refusal.returncode == 2, refusal.stderr
    lines = [line for line in refusal.stderr.splitlines() if line.startswith("queueserver:")]
    assert len(lines) == 1 and named in lines[0], refusal.stderr
    server = server_factory(db)
    assert make_client(server.endpoint).list_queues().get("QueueUrls", []) == []
    server.stop()


def test_a_change_the_existing_queue_cannot_take_is_refused_before_any_queue_is_touched(
        tmp_path: Path, server_factory: Any, make_client: Any) -> None:
    db = tmp_path / "q.db"
    first = server_factory(db)
    make_client(first.endpoint).create_queue(QueueName="x.fifo", Attributes={
        "FifoQueue": "true", "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
    first.stop()
    refusal = try_serve(db, "--config", _config(
        tmp_path, '[queues.early]\n[queues."x.fifo"]\nDeduplicationScope = "queue"\n'))
    assert refusal.returncode == 2
    assert "key queues.x.fifo: Invalid value for the parameter FifoThroughputLimit" in refusal.stderr
    again = server_factory(db)
    sqs = make_client(again.endpoint)
    assert [url.rpartition("/")[2] for url in sqs.list_queues()["QueueUrls"]] == ["x.fifo"]
    url = sqs.get_queue_url(QueueName="x.fifo")["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DeduplicationScope"])["Attributes"] == \
        {"DeduplicationScope": "messageGroup"}
    again.stop()


def test_the_configuration_pages_example_serves_the_address_the_ready_line_prints(
        tmp_path: Path, server_factory: Any, make_client: Any) -> None:
    """The page's TOML example, as printed (its port and db give way to the test's own on the command line)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    example = page.split("## Queues in the config file", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    server = server_factory(tmp_path / "q.db", "--config", _config(tmp_path, example))
    assert server.endpoint.startswith("http://127.0.0.1:")
    sqs = make_client(server.endpoint)
    assert _attributes(sqs, "orders")["VisibilityTimeout"] == "60"
    fifo = make_client(server.endpoint, region="eu-west-1")
    assert _attributes(fifo, "payments.fifo")["ContentBasedDeduplication"] == "true"
