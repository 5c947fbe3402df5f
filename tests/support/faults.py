"""Helpers of the fault and admin tests: a tally of what was acknowledged, the shape of a
503, the final drain and comparison, and a start-up that must be refused."""

from __future__ import annotations

import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from support.crash_ledger import Figures
from support.server import ACCOUNT, Refusal, Server, advance_clock, integrity, try_serve, wait_for
from support.sqs import receive_and_delete_all
from support.wire import raw_json_call

QUEUE = "faults"


def url_of(server: Server) -> str:
    return f"{server.endpoint}/{ACCOUNT}/{QUEUE}"


class Tally:
    """What the server said about each send: acknowledged (with its MessageId) or refused."""

    def __init__(self) -> None:
        self.acked: dict[str, str] = {}
        self.refused: list[str] = []
        self.errors: list[ClientError] = []
        self._n = 0
        self._lock = threading.Lock()

    def body(self, size: int = 0) -> str:
        with self._lock:
            self._n += 1
            n = self._n
        return f"msg-{n:06d}-" + "z" * size

    def send(self, client: Any, url: str, size: int = 0) -> ClientError | None:
        body = self.body(size)
        try:
            mid = client.send_message(QueueUrl=url, MessageBody=body)["MessageId"]
        except ClientError as exc:
            with self._lock:
                self.refused.append(body)
                self.errors.append(exc)
            return exc
        with self._lock:
            self.acked[body] = mid
        return None

    def send_acknowledged(self, client: Any, url: str, count: int, size: int = 0, why: str = "") -> None:
        """`count` sends that must all be acknowledged."""
        for _ in range(count):
            assert self.send(client, url, size=size) is None, why


def assert_service_unavailable(exc: BaseException | None) -> None:
    assert isinstance(exc, ClientError), f"expected a 503 ServiceUnavailable, got {exc!r}"
    assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 503, exc.response
    err = exc.response["Error"]
    assert err["Code"] == "ServiceUnavailable", err
    assert err.get("Message"), err


def assert_raw_503(server: Server, tally: Tally, size: int = 0) -> None:
    """The wire shape of the 503: JSON __type, x-amzn-query-error, a message (and nothing stored)."""
    body = tally.body(size)
    resp = raw_json_call(server.endpoint, "SendMessage", {"QueueUrl": url_of(server), "MessageBody": body},
                         timeout=30)
    if resp.status == 200:
        tally.acked[body] = resp.json()["MessageId"]
    assert resp.status == 503, (resp.status, resp.body)
    tally.refused.append(body)
    payload = resp.json()
    assert payload["__type"] == "com.amazonaws.sqs#ServiceUnavailable", payload
    assert payload.get("message") or payload.get("Message"), payload
    assert resp.headers.get("x-amzn-query-error") == "ServiceUnavailable;Receiver", resp.headers


def wait_for_log(server: Server, text: str, timeout: float = 10) -> str:
    """The server's log once it has `text` in it."""
    def logged() -> str | None:
        log = server.stderr_text()
        return log if text in log else None

    return str(wait_for(logged, f"the server to log {text!r}", timeout, interval=0.05,
                        detail=lambda: f"--- stderr ---\n{server.stderr_text()}"))


def drain(server: Server, client: Any) -> dict[str, str]:
    """Everything in the queue (body -> MessageId), deleting as we go; needs --test-clock."""
    advance_clock(server.endpoint, 13 * 3600)  # past any visibility timeout, inside the 4-day retention
    counted = client.get_queue_attributes(QueueUrl=url_of(server), AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    got: dict[str, str] = {}
    for m in receive_and_delete_all(client, url_of(server), VisibilityTimeout=43200):
        assert m["Body"] not in got, f"{m['Body'][:20]} delivered twice in the drain"
        got[m["Body"]] = m["MessageId"]
    # Every message counted visible is one a receive returns, and none is left in flight after 13 hours.
    assert (int(counted["ApproximateNumberOfMessages"]), int(counted["ApproximateNumberOfMessagesNotVisible"])) \
        == (len(got), 0), f"counted {counted} before the drain, which received {len(got)}"
    return got


def assert_nothing_acknowledged_lost(tally: Tally, drained: dict[str, str], deleted: Collection[str] = frozenset()) -> None:
    missing = [b[:20] for b in tally.acked if b not in drained and b not in deleted]
    assert not missing, f"{len(missing)} acknowledged sends are gone: {missing[:10]}"
    wrong = [b[:20] for b, mid in tally.acked.items() if b in drained and drained[b] != mid]
    assert not wrong, f"MessageIds changed: {wrong[:10]}"
    came_back = [b[:20] for b in deleted if b in drained]
    assert not came_back, f"deleted messages came back: {came_back[:10]}"
    landed = [b[:20] for b in tally.refused if b in drained]
    assert not landed, f"sends answered 503 ('nothing was changed') were stored: {landed[:10]}"
    extra = [b[:20] for b in drained if b not in tally.acked]
    assert not extra, f"messages nobody sent: {extra[:10]}"


def restart_and_check(servers: Any, server: Server, db: Path, sqs_client: Any, tally: Tally,
                      deleted: Collection[str] = frozenset()) -> None:
    """SIGKILL, restart on the same file, drain, compare; then a clean stop and an integrity check."""
    server.kill()
    start_again_and_check(servers, db, sqs_client, tally, deleted)
    assert integrity(db) == "ok"


def start_again_and_check(servers: Any, db: Path, sqs_client: Any, tally: Tally,
                          deleted: Collection[str] = frozenset()) -> None:
    """A new server on the file: drain it, compare with what was acknowledged, and stop it cleanly."""
    again = servers.start(db, "--test-clock")
    drained = drain(again, sqs_client(again.endpoint))
    assert_nothing_acknowledged_lost(tally, drained, deleted)
    assert again.stop() == 0, again.stderr_text()


def refuse_to_serve(db: Path, *extra: str) -> Refusal:
    """`serve` must exit 2 at once, print nothing on stdout, and say why in one stderr line."""
    result = try_serve(db, *extra)
    assert result.returncode == 2, f"rc={result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "READY" not in result.stdout, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    assert lines[0].startswith("queueserver: "), lines
    assert str(db) in lines[0], f"the message does not name the file: {lines[0]}"
    return result


def new_server(servers: Any, db: Path, sqs_client: Any) -> tuple[Server, Any, str]:
    server = servers.start(db, "--test-clock")
    client = sqs_client(server.endpoint)
    client.create_queue(QueueName=QUEUE)
    return server, client, url_of(server)


def assert_acknowledged_work_survived(figures: Figures) -> None:
    """The crash workload's verdict: nothing acknowledged lost or resurrected, no receive count
    forgotten, no message that was never sent, and a file whose integrity check is ok."""
    report = figures.report()
    assert not figures.lost, f"acknowledged sends were lost\n{report}"
    assert not figures.resurrected, f"messages came back after an acknowledged delete\n{report}"
    assert not figures.count_regressions, f"a receive count went down\n{report}"
    assert not figures.counts_not_increased, f"an acknowledged receive was forgotten\n{report}"
    assert not figures.wrong_ids, report
    assert not figures.phantoms, report
    assert figures.integrity == "ok", report
