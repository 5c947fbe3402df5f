"""`--log-format json` and `--access-log`: what a log shipper reads on stderr."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from urllib.parse import urlencode, urlsplit

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


FORGED = "x\n2026-01-01 00:00:00 INFO queueserver.access: DeleteQueue orders 200 1.000ms\u2028\x1b[2J"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_access_log_escapes_control_characters_a_client_put_in_its_fields(server_factory, tmp_path, log_format):
    from support.wire import raw_json_call

    server = server_factory(tmp_path / "forged.db", "--log-format", log_format, "--access-log")
    assert raw_json_call(server.endpoint, "GetQueueAttributes", {"QueueUrl": FORGED}).status == 400
    form = urlencode({"Action": "SendMessage\nforged", "Version": "2012-11-05"}).encode()
    request = urllib.request.Request(server.endpoint, data=form, headers={
        "Content-Type": "application/x-www-form-urlencoded"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    with refused.value:
        assert refused.value.code == 400
    server.stop()
    lines = server.stderr_text().splitlines()
    assert not any(line.startswith("2026-01-01") or "\x1b" in line or "\u2028" in line for line in lines)
    escaped = FORGED.replace("\n", "\\n").replace("\u2028", "\\u2028").replace("\x1b", "\\x1b")
    if log_format == "json":
        access = [json.loads(line) for line in lines if '"queueserver.access"' in line]
        assert [a["queue"] for a in access][0] == escaped
        assert all("\n" not in a["message"] and "\n" not in a["action"] for a in access)
    else:
        access = [line for line in lines if " queueserver.access: " in line]
        assert f"GetQueueAttributes {escaped} 400 " in access[0], access
        assert len(access) == 2, access
