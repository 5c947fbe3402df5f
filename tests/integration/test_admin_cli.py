"""The admin CLI (`queueserver queues|queue|send|receive|peek|redrive|stats|subscription(s)`) against a real server."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clients import never_retrying_client
from support.server import REPO_ROOT, Server, start_server
from support.sqs import unique_queue_name

pytestmark = pytest.mark.server_process


@pytest.fixture(scope="module")
def admin_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server on the real clock: move tasks pace themselves in real seconds."""
    server = start_server(tmp_path_factory.mktemp("admin") / "queueserver.db")
    yield server
    assert server.stop() == 0


@pytest.fixture
def admin_sqs(admin_server: Server) -> Any:
    return never_retrying_client(admin_server.endpoint)


def cli(server: Server, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "queueserver", *args, "--endpoint", server.endpoint],
                          cwd=REPO_ROOT, env=_env(), input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


def cli_json(server: Server, *args: str, stdin: str | None = None) -> Any:
    done = cli(server, *args, "--json", stdin=stdin)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def _queue(server: Server, *options: str) -> tuple[str, str]:
    name = unique_queue_name()
    return name, cli_json(server, "queue", "create", name, *options)["QueueUrl"]


def test_queue_create_makes_the_queue_with_its_attributes_and_tags_and_attributes_shows_and_sets_them(
        admin_server: Server, admin_sqs: Any) -> None:
    name, url = _queue(admin_server, "--attribute", "VisibilityTimeout=45", "--tag", "team=shop")
    assert url == admin_sqs.get_queue_url(QueueName=name)["QueueUrl"]
    assert admin_sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "shop"}
    attributes = cli_json(admin_server, "queue", "attributes", name)
    assert attributes["VisibilityTimeout"] == "45" and attributes["QueueArn"].endswith(f":{name}")
    changed = cli_json(admin_server, "queue", "attributes", name, "--set", "DelaySeconds=3")
    assert changed["DelaySeconds"] == "3"
    assert admin_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])["Attributes"] == \
        {"DelaySeconds": "3"}
    fifo = cli_json(admin_server, "queue", "create", name + ".fifo")["QueueUrl"]
    assert admin_sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["FifoQueue"])["Attributes"] == \
        {"FifoQueue": "true"}


def test_send_takes_the_body_from_the_argument_a_file_or_stdin_and_peek_shows_them_without_moving_anything(
        admin_server: Server, admin_sqs: Any, tmp_path: Path) -> None:
    name, url = _queue(admin_server)
    body_file = tmp_path / "body.json"
    body_file.write_text('{"order": 7}\n')  # a file's and a pipe's last newline is no part of the body
    sent = [cli_json(admin_server, "send", name, "from the argument\n"),
            cli_json(admin_server, "send", name, "--file", str(body_file)),
            cli_json(admin_server, "send", name, "-", stdin="from stdin\n"),
            cli_json(admin_server, "send", name, stdin="two lines\nand a blank one\n\n")]
    peeked = cli_json(admin_server, "peek", name)
    assert [m["Body"] for m in peeked] == ["from the argument\n", '{"order": 7}', "from stdin",
                                           "two lines\nand a blank one\n"]
    assert [m["MessageId"] for m in peeked] == [s["MessageId"] for s in sent]
    assert {m["State"] for m in peeked} == {"visible"}
    assert cli_json(admin_server, "peek", name) == peeked  # nothing was received: no receive count moved
    counts = admin_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages",
                                                                    "ApproximateNumberOfMessagesNotVisible"])
    assert counts["Attributes"] == {"ApproximateNumberOfMessages": "4", "ApproximateNumberOfMessagesNotVisible": "0"}


def test_receive_leaves_messages_in_flight_and_with_delete_deletes_them(
        admin_server: Server, admin_sqs: Any) -> None:
    name, url = _queue(admin_server)
    for body in ("a", "b", "c"):
        admin_sqs.send_message(QueueUrl=url, MessageBody=body)
    first = cli_json(admin_server, "receive", name, "--max", "2", "--wait", "1")
    assert len(first) == 2 and all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in first)
    states = {m["Body"]: m["State"] for m in cli_json(admin_server, "peek", name)}
    assert sorted(states.values()) == ["in_flight", "in_flight", "visible"]
    rest = cli_json(admin_server, "receive", name, "--max", "10", "--delete")
    assert [m["Body"] for m in rest] == [b for b, state in states.items() if state == "visible"]
    assert [m["State"] for m in rest] == ["deleted"]
    assert [m["Body"] for m in cli_json(admin_server, "peek", name)] == sorted(m["Body"] for m in first)
    assert cli_json(admin_server, "receive", name) == []


def test_queues_lists_counts_oldest_age_and_dead_letter_queue_and_stats_adds_them_up(
        admin_server: Server, admin_sqs: Any) -> None:
    prefix = unique_queue_name()
    dlq_url = admin_sqs.create_queue(QueueName=prefix + "-dlq")["QueueUrl"]
    dlq_arn = admin_sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = admin_sqs.create_queue(QueueName=prefix + "-main", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3})})["QueueUrl"]
    for body in ("1", "2", "3"):
        admin_sqs.send_message(QueueUrl=url, MessageBody=body)
    admin_sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)
    admin_sqs.send_message(QueueUrl=dlq_url, MessageBody="dead")
    admin_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=600)
    rows = {r["name"]: r for r in cli_json(admin_server, "queues", "--prefix", prefix)}
    assert set(rows) == {prefix + "-dlq", prefix + "-main"}
    main = rows[prefix + "-main"]
    assert (main["visible"], main["in_flight"], main["delayed"], main["dead_letter_queue"], main["url"]) == \
        (2, 1, 1, prefix + "-dlq", url)
    assert isinstance(main["oldest_age_seconds"], int) and main["oldest_age_seconds"] >= 0
    assert rows[prefix + "-dlq"]["visible"] == 1 and rows[prefix + "-dlq"]["dead_letter_queue"] is None
    table = cli(admin_server, "queues", "--prefix", prefix)
    assert table.returncode == 0 and prefix + "-main" in table.stdout and "in flight" in table.stdout

    everything = cli_json(admin_server, "queues", "--all")
    totals = cli_json(admin_server, "stats")
    assert totals["queues"] == len(everything)
    assert (totals["visible"], totals["in_flight"], totals["delayed"]) == tuple(
        sum(r[key] for r in everything) for key in ("visible", "in_flight", "delayed"))
    assert totals["dead_letter_queues"] >= 1 and totals["messages_in_dead_letter_queues"] >= 1


def test_queues_lists_a_page_at_a_time_and_says_how_to_list_the_rest(admin_server: Server, admin_sqs: Any) -> None:
    prefix = unique_queue_name()
    names = [f"{prefix}-{i}" for i in range(5)]
    for name in names:
        admin_sqs.create_queue(QueueName=name)
    first = cli(admin_server, "queues", "--prefix", prefix, "--max", "2", "--json")
    assert first.returncode == 0, first.stderr
    assert [r["name"] for r in json.loads(first.stdout)] == names[:2]
    token = first.stderr.split("--next-token ", 1)[1].split()[0]
    second = cli(admin_server, "queues", "--prefix", prefix, "--max", "2", "--next-token", token, "--json")
    assert [r["name"] for r in json.loads(second.stdout)] == names[2:4] and "--next-token" in second.stderr
    table = cli(admin_server, "queues", "--prefix", prefix, "--max", "2", "--next-token", token)
    assert table.returncode == 0 and names[3] in table.stdout and names[1] not in table.stdout
    assert [r["name"] for r in cli_json(admin_server, "queues", "--prefix", prefix, "--all")] == names
    last = cli(admin_server, "queues", "--prefix", prefix, "--max", "5", "--json")
    assert len(json.loads(last.stdout)) == 5 and last.stderr == ""  # nothing left: no hint
    refused = cli(admin_server, "queues", "--max", "0")
    assert refused.returncode == 2 and "--max" in refused.stderr


def test_purge_empties_a_queue_and_delete_removes_it_after_which_commands_exit_4(
        admin_server: Server, admin_sqs: Any) -> None:
    name, url = _queue(admin_server)
    admin_sqs.send_message(QueueUrl=url, MessageBody="x")
    assert cli_json(admin_server, "queue", "purge", name) == {"purged": name}
    assert cli_json(admin_server, "peek", name) == []
    assert cli_json(admin_server, "queue", "delete", name) == {"deleted": name}
    assert admin_sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", []) == []
    missing = cli(admin_server, "send", name, "x", "--json")
    assert missing.returncode == 4 and missing.stdout == ""
    assert "NonExistentQueue" in missing.stderr or "QueueDoesNotExist" in missing.stderr


def test_the_endpoint_comes_from_the_environment_and_an_unreachable_one_exits_3(
        admin_server: Server) -> None:
    name, _ = _queue(admin_server)
    env = {**_env(), "AWS_ENDPOINT_URL_SQS": admin_server.endpoint}
    found = subprocess.run([sys.executable, "-m", "queueserver", "queues", "--prefix", name, "--json"],
                           env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert [r["name"] for r in json.loads(found.stdout)] == [name]
    unreachable = subprocess.run([sys.executable, "-m", "queueserver", "queues", "--endpoint",
                                  "http://127.0.0.1:9", "--json"], env=_env(), cwd=REPO_ROOT,
                                 capture_output=True, text=True, timeout=60)
    assert unreachable.returncode == 3 and "cannot reach http://127.0.0.1:9" in unreachable.stderr


def _dead_letters(admin_sqs: Any, count: int) -> tuple[str, str, str]:
    """A dead-letter queue holding `count` messages and a queue to move them to."""
    name = unique_queue_name()
    dlq = admin_sqs.create_queue(QueueName=name + "-dlq")["QueueUrl"]
    target = admin_sqs.create_queue(QueueName=name + "-target")["QueueUrl"]
    dlq_arn = admin_sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    admin_sqs.create_queue(QueueName=name + "-source", Attributes={  # SQS redrives only a queue serving as a DLQ
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})
    for start in range(0, count, 10):
        admin_sqs.send_message_batch(QueueUrl=dlq, Entries=[{"Id": str(i), "MessageBody": f"m{i}"}
                                                      for i in range(start, min(count, start + 10))])
    return name + "-dlq", dlq, target


def test_redrive_shows_progress_until_the_task_completes(admin_server: Server, admin_sqs: Any) -> None:
    dlq_name, dlq, target = _dead_letters(admin_sqs, 8)
    done = cli(admin_server, "redrive", dlq_name, "--to", dlq_name.replace("-dlq", "-target"), "--rate", "4",
               "--interval", "0.1", "--json")
    assert done.returncode == 0, done.stderr
    progress = [json.loads(line) for line in done.stdout.splitlines()]
    moved = [p["moved"] for p in progress]
    assert moved == sorted(moved) and len(set(moved)) > 2  # seen moving, never backwards
    assert progress[-1] == {"status": "COMPLETED", "moved": 8, "to_move": 8}
    assert all(p["status"] == "RUNNING" for p in progress[:-1])
    counts = admin_sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["ApproximateNumberOfMessages"])
    assert counts["Attributes"]["ApproximateNumberOfMessages"] == "8"


def test_ctrl_c_cancels_the_redrive_task(admin_server: Server, admin_sqs: Any) -> None:
    dlq_name, dlq, target = _dead_letters(admin_sqs, 30)
    with subprocess.Popen([sys.executable, "-m", "queueserver", "redrive", dlq_name, "--to",
                           dlq_name.replace("-dlq", "-target"), "--rate", "1", "--interval", "0.1", "--json",
                           "--endpoint", admin_server.endpoint], cwd=REPO_ROOT, env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:  # pipes closed at the end
        try:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())  # the task runs: the CLI is polling it
            assert first["status"] == "RUNNING"
            proc.send_signal(signal.SIGINT)
            rest, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    last = json.loads(rest.splitlines()[-1])
    assert last["status"] == "CANCELLED" and last["moved"] < 30
    dlq_arn = admin_sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    task = admin_sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=1)["Results"][0]
    assert task["Status"] == "CANCELLED"


# -- subscriptions: `subscriptions`, `subscription create|delete`, and a subscription anywhere a
# queue is taken, as QUEUE~NAME or its URL

def test_subscription_create_is_idempotent_subscriptions_lists_each_with_its_counts_and_delete_takes_three_forms(
        admin_server: Server, admin_sqs: Any) -> None:
    name, url = _queue(admin_server)
    admin_sqs.send_message(QueueUrl=url, MessageBody="before")
    billing = cli_json(admin_server, "subscription", "create", name, "billing")["SubscriptionUrl"]
    assert billing == url + "~billing"
    assert cli_json(admin_server, "subscription", "create", name, "billing") == {"SubscriptionUrl": billing}
    audit = cli_json(admin_server, "subscription", "create", name, "audit", "--start-from", "all")["SubscriptionUrl"]
    mail = cli_json(admin_server, "subscription", "create", name, "mail")["SubscriptionUrl"]
    admin_sqs.send_message(QueueUrl=url, MessageBody="after")
    admin_sqs.receive_message(QueueUrl=audit, MaxNumberOfMessages=1, VisibilityTimeout=600)
    rows = cli_json(admin_server, "subscriptions", name)
    assert [(r["name"], r["url"], r["visible"], r["in_flight"], r["delayed"]) for r in rows] == [
        ("audit", audit, 1, 1, 0), ("billing", billing, 1, 0, 0), ("mail", mail, 1, 0, 0)]
    table = cli(admin_server, "subscriptions", name)
    assert table.returncode == 0 and billing in table.stdout and "in flight" in table.stdout

    assert cli_json(admin_server, "subscription", "delete", name, "billing") == {"deleted": billing}
    assert cli_json(admin_server, "subscription", "delete", f"{name}~audit") == {"deleted": audit}
    assert cli_json(admin_server, "subscription", "delete", mail) == {"deleted": mail}
    assert cli_json(admin_server, "subscriptions", name) == []
    assert int(admin_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
               ["Attributes"]["ApproximateNumberOfMessages"]) == 2  # the queue's own messages stay


def test_subscription_commands_refuse_what_is_not_a_subscription_with_meaningful_exit_codes(
        admin_server: Server) -> None:
    name, url = _queue(admin_server)
    missing = cli(admin_server, "subscription", "delete", name, "nobody", "--json")
    assert missing.returncode == 4 and missing.stdout == "" and f"{name} has no subscription nobody" in missing.stderr
    assert cli(admin_server, "receive", f"{name}~nobody").returncode == 4
    assert cli(admin_server, "subscriptions", name + "-absent").returncode == 4
    not_one = cli(admin_server, "subscription", "delete", name)
    assert not_one.returncode == 2 and "names a queue" in not_one.stderr
    assert cli(admin_server, "subscription", "create", name).returncode == 2
    bad_name = cli(admin_server, "subscription", "create", name, "no spaces")
    assert bad_name.returncode == 1 and "InvalidParameterValue" in bad_name.stderr
    billing = cli_json(admin_server, "subscription", "create", name, "billing")["SubscriptionUrl"]
    nested = cli(admin_server, "subscription", "create", billing, "deeper")
    assert nested.returncode == 1 and "no subscriptions of its own" in nested.stderr
    sent = cli(admin_server, "send", f"{name}~billing", "x")
    assert sent.returncode == 1 and "UnsupportedOperation" in sent.stderr


def test_receive_peek_purge_and_attributes_work_on_a_subscription_named_queue_tilde_name_or_by_its_url(
        admin_server: Server, admin_sqs: Any) -> None:
    name, url = _queue(admin_server)
    billing = cli_json(admin_server, "subscription", "create", name, "billing")["SubscriptionUrl"]
    for body in ("a", "b", "c"):
        admin_sqs.send_message(QueueUrl=url, MessageBody=body)
    for address in (f"{name}~billing", billing):
        assert [m["Body"] for m in cli_json(admin_server, "peek", address)] == ["a", "b", "c"]
    received = cli_json(admin_server, "receive", f"{name}~billing", "--max", "2", "--delete")
    assert len(received) == 2
    rest = cli_json(admin_server, "peek", billing)
    assert [m["Body"] for m in rest] == sorted({"a", "b", "c"} - {m["Body"] for m in received})
    assert [m["Body"] for m in cli_json(admin_server, "peek", name)] == ["a", "b", "c"]  # the queue's own: untouched

    changed = cli_json(admin_server, "queue", "attributes", f"{name}~billing", "--set", "VisibilityTimeout=77")
    assert changed["VisibilityTimeout"] == "77" and changed["QueueArn"].endswith(f":{name}~billing")
    assert admin_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"] == \
        {"VisibilityTimeout": "30"}
    assert cli_json(admin_server, "queue", "purge", billing) == {"purged": billing}
    assert cli_json(admin_server, "peek", billing) == []
    assert len(cli_json(admin_server, "peek", name)) == 3


def test_queues_lists_each_queues_subscriptions_with_their_own_counts_and_stats_counts_them(
        admin_server: Server, admin_sqs: Any) -> None:
    prefix = unique_queue_name()
    url = admin_sqs.create_queue(QueueName=prefix + "-orders")["QueueUrl"]
    admin_sqs.create_queue(QueueName=prefix + "-plain")
    for subscription in ("billing", "audit"):
        cli_json(admin_server, "subscription", "create", prefix + "-orders", subscription)
    admin_sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(i)} for i in range(3)])
    admin_sqs.receive_message(QueueUrl=url + "~audit", MaxNumberOfMessages=2, VisibilityTimeout=600)
    rows = {r["name"]: r for r in cli_json(admin_server, "queues", "--prefix", prefix)}
    assert set(rows) == {prefix + "-orders", prefix + "-plain"}  # a subscription is not a queue of its own
    assert rows[prefix + "-plain"]["subscriptions"] == []
    orders = rows[prefix + "-orders"]
    assert orders["visible"] == 3
    assert [(s["name"], s["url"], s["visible"], s["in_flight"], s["delayed"]) for s in orders["subscriptions"]] \
        == [("audit", url + "~audit", 1, 2, 0), ("billing", url + "~billing", 3, 0, 0)]
    table = cli(admin_server, "queues", "--prefix", prefix)
    lines = table.stdout.splitlines()
    orders_line = next(i for i, line in enumerate(lines) if prefix + "-orders" in line)
    assert "~audit" in lines[orders_line + 1] and "~billing" in lines[orders_line + 2]  # indented under it
    totals = cli_json(admin_server, "stats")
    assert totals["subscriptions"] == sum(len(r["subscriptions"]) for r in cli_json(admin_server, "queues", "--all"))
    assert totals["subscriptions"] >= 2


class _WithoutExtensions(http.server.BaseHTTPRequestHandler):
    """An SQS endpoint without queueserver's extensions: AWS's answer to an action it does not know."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"__type":"com.amazon.coral.service#UnknownOperationException","message":null}'
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_against_an_endpoint_without_the_extension_subscription_commands_exit_6_saying_so() -> None:
    endpoint = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _WithoutExtensions)
    thread = threading.Thread(target=endpoint.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{endpoint.server_address[1]}/123456789012/orders"
        for args in (["subscriptions", url], ["subscription", "delete", url + "~billing"], ["peek", url]):
            done = subprocess.run([sys.executable, "-m", "queueserver", *args, "--json", "--endpoint", url],
                                  cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=60)
            assert done.returncode == 6 and done.stdout == "", done.stderr
            assert "is a queueserver extension" in done.stderr and "does not offer" in done.stderr
    finally:
        endpoint.shutdown()
        endpoint.server_close()
        thread.join()


def test_receive_delete_shows_its_messages_as_deleted_and_counts_say_one_message(
        admin_server: Server, admin_sqs: Any) -> None:
    name, url = _queue(admin_server)
    admin_sqs.send_message(QueueUrl=url, MessageBody="only")
    table = cli(admin_server, "receive", name, "--delete")
    assert table.returncode == 0, table.stderr
    assert f"1 message from {name}" in table.stdout and "deleted" in table.stdout, table.stdout
    assert "received" not in table.stdout, table.stdout
    admin_sqs.send_message(QueueUrl=url, MessageBody="kept")
    check = subprocess.run([sys.executable, "-m", "queueserver", "check", "--db", str(admin_server.db_path)],
                           cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert f"{name}: 1 message, 0 in flight" in check.stdout, check.stdout
