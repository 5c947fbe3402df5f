"""`--log-format json` and `--access-log`: what a log shipper reads on stderr."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

pytestmark = pytest.mark.server_process


def workload(server, make_client) -> None:
    sqs = make_client(server.endpoint)
    url = sqs.create_queue(QueueName="logged")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    with pytest.raises(ClientError):
        sqs.get_queue_url(QueueName="no-such-queue")


def test_json_lines_carry_the_access_log_fields(server_factory, make_client, tmp_path):
    server = server_factory(tmp_path / "json.db", "--log-format", "json", "--access-log")
    workload(server, make_client)
    address = urlsplit(server.endpoint)
    with socket.create_connection((address.hostname, address.port), timeout=10) as garbage:
        garbage.sendall(b"GARBAGE\r\n\r\n")  # uvicorn's own warning must be a JSON line too
        assert garbage.recv(1000).startswith(b"HTTP/1.1 400")
    server.stop()
    lines = [json.loads(line) for line in server.stderr_text().splitlines() if line.strip()]
    assert lines, "nothing was logged"
    for line in lines:
        assert {"time", "level", "logger", "message"} <= line.keys(), line
    assert any(line["logger"].startswith("uvicorn") for line in lines), lines
    access = [line for line in lines if line["logger"] == "queueserver.access"]
    assert [(a["action"], a["queue"], a["status"]) for a in access] == [
        ("CreateQueue", "logged", 200), ("SendMessage", "logged", 200), ("GetQueueUrl", "no-such-queue", 400)]
    for line in access:
        assert line["level"] == "INFO"
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
        assert line["message"].startswith(f"{line['action']} {line['queue']} {line['status']} ")


def test_the_access_log_is_off_by_default_and_plain_text_when_on(server_factory, make_client, tmp_path):
    quiet = server_factory(tmp_path / "quiet.db")
    workload(quiet, make_client)
    quiet.stop()
    assert "queueserver.access" not in quiet.stderr_text()

    logged = server_factory(tmp_path / "text.db", "--access-log", "--log-level", "warning")
    workload(logged, make_client)
    logged.stop()
    access = [line for line in logged.stderr_text().splitlines() if " queueserver.access: " in line]
    assert [line.split(" queueserver.access: ")[1].rsplit(" ", 1)[0] for line in access] == [
        "CreateQueue logged 200", "SendMessage logged 200", "GetQueueUrl no-such-queue 400"]
    assert all(line.endswith("ms") for line in access)
    with pytest.raises(json.JSONDecodeError):
        json.loads(access[0])
