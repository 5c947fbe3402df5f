"""Failover: a standby follows the primary's replica, is promoted when the primary dies, takes writes
on the same port in the same process, and writes a new generation; an old primary that comes back (or
never died) finds the newer generation and refuses to write.

Real processes, the real Litestream, the real clock: the tests wait for events (/ready, /metrics, log
lines, exits), never for a fixed time.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest
from support.auth import presign
from support.clients import never_retrying_client
from support.machine_loss import lose_the_machine, wait_until_replicating
from support.metrics import get, health, scrape
from support.server import run_queueserver, start_server, try_serve, wait_for

from queueserver.replication.generations import FENCE_SECONDS
from queueserver.testing import QueueServer


def caught_up(endpoint: str) -> None:
    key = ("queueserver_replication_transactions_behind", frozenset())  # absent until Litestream reports
    wait_for(lambda: scrape(endpoint).samples.get(key) == 0,
             "the replica to catch up", timeout=30, interval=0.05)


def start_standby(db: Path, replica: Path, log_dir: Path) -> QueueServer:
    standby = QueueServer(db, test_clock=False, command="standby", extra_args=("--from", str(replica)),
                          log_path=log_dir / f"{db.name}.standby.log", ready_timeout=30)
    return standby.start()


def following(endpoint: str, key_id: str | None = None) -> dict[str, Any]:
    """/ready of a standby once its copy holds everything the replica has (with credentials on, signed by
    `key_id`, a key allowed queueserver:GetMetrics: to others /ready says only its state)."""
    path = "/ready" if key_id is None else presign(endpoint + "/ready", key_id, 60)[len(endpoint):]

    def current() -> dict[str, Any] | None:
        status, body = health(endpoint, path)
        shown = body.get("replication", {})
        return body if status == 503 and shown.get("transactions_behind") == 0 else None

    return wait_for(current, "the standby to follow the replica", timeout=30, interval=0.05)


def reads(client: Any, name: str = "orders") -> str | None:
    """The queue's URL from a standby, once its snapshot has it (None until then)."""
    try:
        return str(client.get_queue_url(QueueName=name)["QueueUrl"])
    except botocore.exceptions.ClientError as error:
        code = error.response["Error"]["Code"]
        assert code in ("ServiceUnavailable", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"), \
            error.response
        return None


def promote(endpoint: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "queueserver", "promote", "--endpoint", endpoint],
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_promoted_standby_takes_writes_and_a_returning_primary_refuses_them(tmp_path: Path) -> None:
    replica = tmp_path / "replica"
    primary = start_server(tmp_path / "primary.db", "--replicate", str(replica), log_dir=tmp_path)
    standby: QueueServer | None = None
    try:
        wait_until_replicating(primary)
        sqs = never_retrying_client(primary.endpoint)
        url = sqs.create_queue(QueueName="orders")["QueueUrl"]
        topic = never_retrying_client(primary.endpoint, service="sns").create_topic(Name="events")["TopicArn"]
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)])
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=4, VisibilityTimeout=600)["Messages"]
        deleted, held = received[:2], received[2:]
        for message in deleted:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        caught_up(primary.endpoint)

        standby = start_standby(tmp_path / "standby.db", replica, tmp_path)
        shown = following(standby.endpoint)
        assert shown["status"] == "standby" and shown["replication"]["role"] == "standby", shown
        assert shown["replication"]["generation"] == 0 and shown["replication"]["lag_seconds"] == 0, shown
        on_standby = never_retrying_client(standby.endpoint)
        standby_url = wait_for(lambda: reads(on_standby), "the standby to answer reads from its first snapshot")
        assert on_standby.list_queues()["QueueUrls"] == [standby_url]  # before "later" is created
        shown_counts = on_standby.get_queue_attributes(QueueUrl=standby_url, AttributeNames=["All"])["Attributes"]
        assert (shown_counts["ApproximateNumberOfMessages"], shown_counts["ApproximateNumberOfMessagesNotVisible"]) \
            == ("6", "2")
        assert on_standby.list_queue_tags(QueueUrl=standby_url).get("Tags", {}) == {}
        for page in ("/console/", "/console/server", "/console/queues/us-east-1/000000000000/orders"):
            status, _, _ = get(standby.endpoint, page)
            assert status == 200, page
        sqs.create_queue(QueueName="later", tags={"team": "billing"})  # on the primary: the standby follows
        later = wait_for(lambda: reads(on_standby, "later"), "a queue created on the primary to show on the standby")
        assert on_standby.list_queue_tags(QueueUrl=later)["Tags"] == {"team": "billing"}
        for write in (lambda: on_standby.receive_message(QueueUrl=standby_url),
                      lambda: on_standby.purge_queue(QueueUrl=standby_url),
                      lambda: on_standby.create_queue(QueueName="another")):
            with pytest.raises(botocore.exceptions.ClientError) as refused:
                write()
            assert refused.value.response["Error"]["Code"] == "ServiceUnavailable"
        sns_on_standby = never_retrying_client(standby.endpoint, service="sns")
        assert [t["TopicArn"] for t in sns_on_standby.list_topics()["Topics"]] == [topic]
        assert sns_on_standby.get_topic_attributes(TopicArn=topic)["Attributes"]["TopicArn"] == topic
        for write in (lambda: sns_on_standby.publish(TopicArn=topic, Message="too early"),
                      lambda: sns_on_standby.create_topic(Name="another")):
            with pytest.raises(botocore.exceptions.ClientError) as refused:
                write()
            assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503, refused.value.response
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            on_standby.send_message(QueueUrl=url, MessageBody="too early")
        assert refused.value.response["Error"]["Code"] == "ServiceUnavailable"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert "this server is a standby" in refused.value.response["Error"]["Message"]
        metrics = scrape(standby.endpoint)
        assert metrics.value("queueserver_role", role="standby") == 1
        assert metrics.value("queueserver_replication_generation") == 0
        for path in (standby.db_path, Path(f"{standby.db_path}-txid")):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        snapshots = list(standby.db_path.parent.glob(f"{standby.db_path.name}.snapshot-*"))
        assert snapshots  # the one the reads above came from
        for path in snapshots:
            with contextlib.suppress(FileNotFoundError):  # one replaced meanwhile is removed
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

        lose_the_machine(primary)
        done = promote(standby.endpoint)
        assert done.returncode == 0 and "writing generation 1" in done.stdout, done.stderr
        new = never_retrying_client(standby.endpoint)
        new_url = new.get_queue_url(QueueName="orders")["QueueUrl"]
        new.send_message(QueueUrl=new_url, MessageBody="after the failover")
        caught_up(standby.endpoint)  # the promoted server's own generation holds the send
        restored = tmp_path / "restored.db"
        done = run_queueserver("restore", "--from", str(replica), "--db", str(restored))
        assert done.returncode == 0 and f"from {(replica / 'gen-1').as_uri()}" in done.stdout, done.stdout
        assert "orders: 9 messages" in done.stdout, done.stdout  # 10 sent, 2 deleted, 1 sent after
        older = run_queueserver("restore", "--from", str(replica), "--db", str(tmp_path / "gen0.db"),
                                "--generation", "0")
        assert older.returncode == 0 and "orders: 8 messages" in older.stdout, older.stdout  # the old primary's
        # Receipt handles of the old primary: valid as after a restart (the key is in the file).
        for message in held:
            new.change_message_visibility(QueueUrl=new_url, ReceiptHandle=message["ReceiptHandle"],
                                          VisibilityTimeout=0)
        bodies = []
        while batch := new.receive_message(QueueUrl=new_url, MaxNumberOfMessages=10).get("Messages", []):
            bodies += [m["Body"] for m in batch]
            new.delete_message_batch(QueueUrl=new_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)])
        assert sorted(bodies) == sorted([f"m{i}" for i in range(10) if f"m{i}" not in
                                         {m["Body"] for m in deleted}] + ["after the failover"])
        metrics = scrape(standby.endpoint)
        assert metrics.value("queueserver_role", role="primary") == 1
        assert metrics.value("queueserver_replication_generation") == 1
        again = promote(standby.endpoint)
        assert again.returncode == 0 and "already the primary" in again.stdout, again.stdout
        assert not Path(f"{standby.db_path}-txid").exists()

        returning = try_serve(tmp_path / "primary.db", "--replicate", str(replica), timeout=30)
        assert returning.returncode == 2, returning
        assert "holds generation 1, newer than this database's generation 0" in returning.stderr
        assert standby.stop() == 0
    finally:
        primary.kill()
        if standby is not None:
            standby.kill()


def test_a_running_primary_that_finds_a_newer_generation_stops_writing_and_exits(tmp_path: Path) -> None:
    """A primary cut off rather than dead (a partition): once the standby is promoted, it stops."""
    replica = tmp_path / "replica"
    primary = start_server(tmp_path / "primary.db", "--replicate", str(replica), log_dir=tmp_path, strict=False)
    standby: QueueServer | None = None
    try:
        wait_until_replicating(primary)
        never_retrying_client(primary.endpoint).create_queue(QueueName="orders")
        caught_up(primary.endpoint)
        standby = start_standby(tmp_path / "standby.db", replica, tmp_path)
        following(standby.endpoint)
        assert promote(standby.endpoint).returncode == 0
        wait_for(lambda: not primary.running, "the old primary to stop", timeout=FENCE_SECONDS * 4 + 10)
        assert primary.returncode == 2
        assert "refusing writes and stopping: the replica" in primary.stderr_text()
        assert standby.running
    finally:
        primary.kill()
        if standby is not None:
            standby.kill()


def test_a_standby_never_removes_a_database_it_did_not_make(tmp_path: Path) -> None:
    db = tmp_path / "somebody.db"
    db.write_bytes(b"")
    standby = QueueServer(db, test_clock=False, command="standby", extra_args=("--from", str(tmp_path / "r")),
                          log_path=tmp_path / "standby.log")
    attempt = standby.try_start(timeout=30)
    assert attempt.returncode == 2 and "is not a standby's copy" in attempt.stderr, attempt
    assert db.exists() and os.path.getsize(db) == 0


def test_promoting_a_server_that_is_not_running_says_so() -> None:
    done = run_queueserver("promote", "--endpoint", "http://127.0.0.1:9")
    assert done.returncode == 3 and "could not reach" in done.stderr


def test_with_credentials_on_only_an_admin_key_promotes_and_a_scraper_reads_the_standbys_metrics(
        tmp_path: Path) -> None:
    from support.auth import KEYS, write_credentials

    credentials = write_credentials(tmp_path / "credentials.toml")
    replica = tmp_path / "replica"
    primary = start_server(tmp_path / "primary.db", "--replicate", str(replica), "--credentials", str(credentials),
                           log_dir=tmp_path)
    standby: QueueServer | None = None
    try:
        wait_until_replicating(primary, key_id="AKIDSCRAPER")
        standby = QueueServer(tmp_path / "standby.db", test_clock=False, command="standby",
                              extra_args=("--from", str(replica), "--credentials", str(credentials)),
                              log_path=tmp_path / "standby.log", ready_timeout=30).start()
        following(standby.endpoint, "AKIDSCRAPER")
        assert health(standby.endpoint, "/ready") == (503, {"status": "standby"})  # unsigned: no replica named

        def promote_as(key_id: str | None) -> subprocess.CompletedProcess[str]:
            env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
            if key_id is not None:
                env.update(AWS_ACCESS_KEY_ID=key_id, AWS_SECRET_ACCESS_KEY=KEYS[key_id]["secret_access_key"])
            return subprocess.run([sys.executable, "-m", "queueserver", "promote", "--endpoint", standby.endpoint],
                                  capture_output=True, text=True, timeout=120, check=False, env=env)

        assert health(standby.endpoint, "/metrics")[0] == 403  # unsigned
        unknown = promote_as(None)
        assert unknown.returncode == 1 and "refused the promotion (403)" in unknown.stderr, unknown.stderr
        scraper = promote_as("AKIDSCRAPER")
        assert scraper.returncode == 1 and "only a key marked admin = true" in scraper.stderr, scraper.stderr
        assert health(standby.endpoint, "/ready")[1]["status"] == "standby"
        admin = promote_as("AKIDOPS")
        assert admin.returncode == 0 and "writing generation 1" in admin.stdout, admin.stderr
    finally:
        primary.kill()
        if standby is not None:
            standby.kill()


def test_a_second_standby_moves_to_the_new_generation_and_is_promoted_after_it(tmp_path: Path) -> None:
    """Two standbys of one primary: the first is promoted (generation 1); the second sees the new
    generation, follows it, and, promoted in turn (by SIGUSR1), writes generation 2 with every message."""
    import signal

    replica = tmp_path / "replica"
    primary = start_server(tmp_path / "primary.db", "--replicate", str(replica), log_dir=tmp_path)
    first = second = None
    try:
        wait_until_replicating(primary)
        sqs = never_retrying_client(primary.endpoint)
        url = sqs.create_queue(QueueName="orders")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="before")
        caught_up(primary.endpoint)
        first = start_standby(tmp_path / "first.db", replica, tmp_path)
        second = start_standby(tmp_path / "second.db", replica, tmp_path)
        following(first.endpoint)
        following(second.endpoint)
        lose_the_machine(primary)
        assert promote(first.endpoint).returncode == 0
        on_first = never_retrying_client(first.endpoint)
        on_first.send_message(QueueUrl=on_first.get_queue_url(QueueName="orders")["QueueUrl"], MessageBody="after")
        caught_up(first.endpoint)

        def on_generation_one() -> bool:
            status, body = health(second.endpoint, "/ready")
            shown = body["replication"]
            return status == 503 and shown["generation"] == 1 and shown["transactions_behind"] == 0

        wait_for(on_generation_one, "the second standby to follow generation 1", timeout=60, interval=0.05)
        assert "the replica has a newer generation 1" in second.stderr_text()
        lose_the_machine(first)
        second.send_signal(signal.SIGUSR1)
        wait_for(lambda: health(second.endpoint, "/ready")[0] == 200, "the second standby to be promoted",
                 timeout=60, interval=0.05)
        assert health(second.endpoint, "/ready")[1]["replication"]["generation"] == 2
        on_second = never_retrying_client(second.endpoint)
        second_url = on_second.get_queue_url(QueueName="orders")["QueueUrl"]
        bodies = [m["Body"] for m in on_second.receive_message(QueueUrl=second_url, MaxNumberOfMessages=10)["Messages"]]
        assert sorted(bodies) == ["after", "before"]
    finally:
        for server in (primary, first, second):
            if server is not None:
                server.kill()
