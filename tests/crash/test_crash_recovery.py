"""Durability under SIGKILL: a 200 means the change is on disk.

Five client threads send (single and batch), receive, delete and change visibility
while the server is SIGKILLed every 3–5 s and restarted on the same file. At the end
every acknowledged send is either deleted by a consumer or still in the queue, no
message whose delete was acknowledged comes back, receive counts never go down, and
the file passes PRAGMA integrity_check and `queueserver check`. The soak run
(`pytest -m soak tests/crash`, test_soak.py) runs the same loop with hundreds of kills. The checker itself is tested first, on made-up
records, so that a clean result means something.
"""

from __future__ import annotations

import re
import socket
import threading

import pytest
from support.crash_ledger import classify
from support.crash_workload import ACKED, REFUSED, UNKNOWN, Ledger, crash_run, verify
from support.clients import ResponseCutShort, never_retrying_client
from support.faults import assert_acknowledged_work_survived
from support.server import run_queueserver

pytestmark = pytest.mark.server_process

KILLS = 8  # plus the final one, under load too: about 40 s
VISIBILITY_RACES = ("AWS.SimpleQueueService.MessageNotInflight", "InvalidParameterValue")


def test_acknowledged_work_survives_repeated_sigkills_under_concurrent_load(tmp_path):
    figures = crash_run(tmp_path, kills=KILLS, seconds_between=(3.0, 5.0))
    report = figures.report()
    print(report)  # shown with -s, and in every assertion message below

    assert figures.kills == KILLS + 1
    assert figures.acked_sends > 1000, f"the load was too light to mean anything\n{report}"
    assert figures.acked_deletes > 500, report
    assert figures.drained > 0, f"some messages must still be in the queue at the end\n{report}"
    assert figures.calls.get("SendMessage:unknown", 0) + figures.calls.get("SendMessageBatch:unknown", 0) \
        + figures.calls.get("DeleteMessage:unknown", 0) + figures.calls.get("ReceiveMessage:unknown", 0) > 0, \
        f"no kill landed while a request was under way: the test proved little\n{report}"
    assert_acknowledged_work_survived(figures)
    # A visibility change that reaches the server just as the message's window closes is
    # rightly refused; any other refusal (or a 5xx) means the server failed a good call.
    unexpected = {k: v for k, v in figures.errors.items() if not (
        k.startswith("ChangeMessageVisibility") and k.split(":", 1)[1] in VISIBILITY_RACES)}
    assert not unexpected, f"the server refused calls it should have served\n{report}"

    result = run_queueserver("check", "--db", str(tmp_path / "crash.db"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "integrity: ok" in result.stdout
    assert "crash-durability: 0 messages, 0 in flight" in result.stdout, result.stdout


# --- the checker catches what it should -------------------------------------------


def _ledger() -> Ledger:
    ledger = Ledger()
    when = (100.0, 100.1, "http://127.0.0.1:1/000000000000/q")
    ledger.send("kept", ACKED, "m-kept", when)
    ledger.send("deleted", ACKED, "m-deleted", when)
    ledger.send("maybe", UNKNOWN, None, when)
    ledger.send("refused", REFUSED, None, when)
    ledger.received([{"MessageId": "m-deleted", "Body": "deleted", "Attributes": {"ApproximateReceiveCount": "1"}}],
                    101.0, 101.1)
    ledger.delete("m-deleted", ACKED, answered_at=101.2, safe_until=102.0)
    return ledger


def test_the_checker_passes_a_clean_record():
    figures = verify(_ledger(), {"kept": ("m-kept", 1), "maybe": ("m-maybe", 1)}, 1, "ok")
    assert figures.ok, figures.report()
    assert figures.unknown_sends_that_landed == 1
    assert figures.acked_deletes == 1


def test_the_checker_flags_a_lost_send_a_resurrection_a_phantom_and_a_bad_integrity():
    ledger = _ledger()
    ledger.received([{"MessageId": "m-deleted", "Body": "deleted", "Attributes": {"ApproximateReceiveCount": "2"}}],
                    103.0, 103.1)  # received after its delete was acknowledged
    figures = verify(ledger, {"deleted": ("m-deleted", 2), "refused": ("m-x", 1)}, 1, "page 3: corrupt")
    assert [x.split()[0] for x in figures.lost] == ["m-kept"]
    assert len(figures.resurrected) == 1 and figures.resurrected[0].startswith("m-deleted")
    assert len(figures.phantoms) == 1
    assert not figures.ok


def test_the_checker_does_not_trust_a_delete_acknowledged_after_the_visibility_window():
    ledger = _ledger()
    ledger.send("late", ACKED, "m-late", (100.0, 100.1, "u"))
    ledger.delete("m-late", ACKED, answered_at=110.0, safe_until=102.0)  # the handle may be stale
    ledger.received([{"MessageId": "m-late", "Body": "late", "Attributes": {"ApproximateReceiveCount": "2"}}],
                    111.0, 111.1)
    figures = verify(ledger, {"kept": ("m-kept", 1), "late": ("m-late", 2)}, 1, "ok")
    assert figures.ok, figures.report()
    assert figures.late_deletes == 1


def test_the_checker_flags_receive_counts_that_go_down_or_stand_still():
    ledger = _ledger()
    ledger.received([{"MessageId": "m-kept", "Body": "kept", "Attributes": {"ApproximateReceiveCount": "3"}}],
                    101.0, 101.1)
    ledger.received([{"MessageId": "m-kept", "Body": "kept", "Attributes": {"ApproximateReceiveCount": "2"}}],
                    102.0, 102.1)
    ledger.received([{"MessageId": "m-kept", "Body": "kept", "Attributes": {"ApproximateReceiveCount": "3"}}],
                    103.0, 103.1)
    # overlapping receives (the second sent before the first was answered) prove nothing
    ledger.received([{"MessageId": "m-kept", "Body": "kept", "Attributes": {"ApproximateReceiveCount": "4"}}],
                    104.0, 104.5)
    ledger.received([{"MessageId": "m-kept", "Body": "kept", "Attributes": {"ApproximateReceiveCount": "5"}}],
                    104.1, 104.2)
    figures = verify(ledger, {"kept": ("m-kept", 6)}, 1, "ok")
    assert len(figures.count_regressions) == 1, figures.report()
    assert len(figures.counts_not_increased) == 1, figures.report()


def test_a_response_cut_short_by_a_kill_counts_as_unknown_not_as_an_empty_success():
    """botocore alone parses a cut body as {}: a batch delete would look answered with nothing deleted."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_with_headers_and_half_a_body() -> None:
        conn, _ = listener.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            while len(body) < length:  # all of it: closing on unread bytes would reset the connection
                body += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n"
                         b"content-length: 120\r\n\r\n{\"Successful\":[")

    server = threading.Thread(target=answer_with_headers_and_half_a_body, daemon=True)
    server.start()
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(ResponseCutShort) as cut:
            never_retrying_client(endpoint).delete_message_batch(
                QueueUrl=f"{endpoint}/000000000000/q", Entries=[{"Id": "a", "ReceiptHandle": "h"}])
    finally:
        server.join(5)
        listener.close()
    assert classify(cut.value) == (UNKNOWN, None)
