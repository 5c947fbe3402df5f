"""The server as a process: READY line, SIGTERM, the clock endpoint, --account-id."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
import urllib.error
import urllib.request

import pytest
from support.server import ClockControl, try_serve
from support.sqs import receive
from support.wire import call_json

pytestmark = pytest.mark.server_process

OTHER_ACCOUNT = "123456789012"


def _http(method, url, payload=None):
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()


def test_the_clock_endpoint_answers_404_without_test_clock(server_factory, tmp_path):
    proc = server_factory(tmp_path / "noclock.db")
    url = proc.endpoint + "/_queueserver/clock"
    assert _http("GET", url)[0] == 404
    assert _http("POST", url, {"advance_seconds": 100})[0] == 404
    proc.stop()


def test_the_clock_endpoint_reads_and_advances_the_manual_clock(server_factory, tmp_path):
    before = time.time_ns() // 1_000_000
    proc = server_factory(tmp_path / "clock.db", "--test-clock")
    after = time.time_ns() // 1_000_000
    clock = ClockControl(proc.endpoint)
    start = clock.now_ms()
    assert before <= start <= after, "a new database's manual clock starts at the wall clock's reading"
    url = call_json(proc.endpoint, "CreateQueue", {"QueueName": "idle"}).json()["QueueUrl"]
    # A second of real time, as the server itself counts it: a long poll ends after its WaitTimeSeconds.
    polled = call_json(proc.endpoint, "ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 1})
    assert (polled.status, polled.json().get("Messages", [])) == (200, [])
    assert clock.now_ms() == start, "the manual clock does not move by itself"
    assert clock.advance(1.5) == start + 1500
    assert clock.now_ms() == start + 1500
    proc.stop()


def test_advances_at_once_add_up_and_every_kind_of_restart_resumes_the_clock_where_it_stood(
        server_factory, tmp_path):
    db = tmp_path / "kept.db"
    first = server_factory(db, "--test-clock")
    clock = ClockControl(first.endpoint)
    start = clock.now_ms()
    with ThreadPoolExecutor(8) as pool:
        for moved in [pool.submit(clock.advance, 1.5) for _ in range(8)]:
            moved.result()
    assert clock.now_ms() == start + 12_000
    first.kill()
    second = server_factory(db, "--test-clock")
    assert ClockControl(second.endpoint).now_ms() == start + 12_000, "a SIGKILL keeps the reading"
    ClockControl(second.endpoint).advance(0.001)
    second.stop()
    third = server_factory(db, "--test-clock")
    assert ClockControl(third.endpoint).now_ms() == start + 12_001, "a clean stop keeps the reading"
    third.stop()


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), 10**12, "soon"])
def test_the_clock_endpoint_refuses_a_move_backwards_or_out_of_range_and_stays_put(server_factory, tmp_path,
                                                                                   seconds):
    proc = server_factory(tmp_path / "bounds.db", "--test-clock")
    clock = ClockControl(proc.endpoint)
    start = clock.now_ms()
    status, body = _http("POST", proc.endpoint + "/_queueserver/clock", {"advance_seconds": seconds})
    assert status == 400, body
    assert "message" in json.loads(body)
    assert clock.now_ms() == start
    proc.stop()


def test_account_id_shapes_queue_urls_and_arns(server_factory, tmp_path, make_client):
    proc = server_factory(tmp_path / "account.db", "--account-id", OTHER_ACCOUNT)
    sqs = make_client(proc.endpoint)
    url = sqs.create_queue(QueueName="accounted")["QueueUrl"]
    assert url == f"{proc.endpoint}/{OTHER_ACCOUNT}/accounted"
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    assert arn["QueueArn"] == f"arn:aws:sqs:us-east-1:{OTHER_ACCOUNT}:accounted"
    assert sqs.get_queue_url(QueueName="accounted", QueueOwnerAWSAccountId=OTHER_ACCOUNT)[
        "QueueUrl"] == url
    proc.stop()


def test_the_server_prints_only_the_ready_line_on_stdout(server_factory, tmp_path, make_client):
    proc = server_factory(tmp_path / "quiet.db")
    sqs = make_client(proc.endpoint)
    url = sqs.create_queue(QueueName="quiet")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    receive(sqs, url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="missing")
    proc.stop()
    assert proc.extra_stdout == []


def test_sigterm_during_a_long_poll_still_exits_cleanly_and_quickly(
        server_factory, tmp_path, make_client):
    proc = server_factory(tmp_path / "term.db", "--test-clock")
    clock = ClockControl(proc.endpoint)
    sqs = make_client(proc.endpoint)
    url = sqs.create_queue(QueueName="polled")["QueueUrl"]
    poller_client = make_client(proc.endpoint)
    outcome: dict[str, object] = {}

    def poll():
        try:
            outcome["messages"] = poller_client.receive_message(QueueUrl=url, WaitTimeSeconds=20).get("Messages", [])
        except Exception as exc:  # noqa: BLE001 - reported below
            outcome["error"] = exc

    thread = threading.Thread(target=poll, daemon=True)
    pending = clock.timers()
    thread.start()
    clock.wait_for_timers(pending + 1)  # the poll is waiting on the server
    # stop() insists on exit code 0 within 15 s: sooner than the poll's 20 s of waiting would end it.
    proc.stop()
    thread.join(15)
    assert outcome == {"messages": []}, "the shutdown answers a waiting long poll (empty) before it exits"


def test_a_server_starts_on_a_fresh_database_path_and_again_on_the_same_one(
        server_factory, tmp_path, make_client):
    db = tmp_path / "twice.db"
    first = server_factory(db)
    make_client(first.endpoint).create_queue(QueueName="persisted")
    first.stop()
    second = server_factory(db)
    assert make_client(second.endpoint).get_queue_url(QueueName="persisted")["QueueUrl"] == (
        f"{second.endpoint}/000000000000/persisted")
    second.stop()


def test_a_taken_port_refuses_the_start_with_exit_2_and_one_line_before_the_database_file_is_created(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        db = tmp_path / "never.db"
        result = try_serve(db, "--port", str(port), "--log-level", "info")
    assert result.returncode == 2, result
    assert "READY" not in result.stdout, result.stdout
    assert result.stderr.strip().splitlines() == [
        f"queueserver: cannot listen on 127.0.0.1 port {port}: Address already in use"], result.stderr
    assert list(tmp_path.iterdir()) == [], "nothing may be written before the port is known to be free"
