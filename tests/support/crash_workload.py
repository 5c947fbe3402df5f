"""The crash workload of tests/crash: its SIGKILL test, the power cuts, the machine losses and the soak runs.

Concurrent boto3 clients send (single and batch), receive, delete and change
visibility while a killer SIGKILLs the server and restarts it on the same file.
Every call is recorded with its outcome:

* acknowledged - a response arrived and said so;
* refused      - a response arrived and said no (an SQS error), or the connection was
                 never made (nothing reached the server);
* unknown      - the request may have reached the server but no response came back
                 (the server died under it): neither acknowledged nor refused.

At the end a `--test-clock` server is started on the file, the clock is moved 13 hours
(past any visibility timeout, well inside the 4-day retention), the queue is drained,
and the records are checked:

* lost: an acknowledged send that is not in the queue and that no consumer tried to delete;
* resurrected: a message received after a delete of it was acknowledged *while the
  deleting receive still held it* (a delete with a stale receipt handle deletes nothing
  on a standard queue, as SQS does, so only deletes acknowledged inside the visibility
  window count);
* count regressions: a receive, sent after another receive of the same message was
  answered, that shows a lower ApproximateReceiveCount; "counts not increased" is the
  stricter form (equal count: an acknowledged claim was forgotten);
* PRAGMA integrity_check.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from support.clients import never_retrying_client as make_client
from support.crash_ledger import ACKED, REFUSED, UNKNOWN, Figures, Ledger, verify
from support.server import ACCOUNT, ServerError, advance_clock, integrity, start_server

QUEUE_NAME = "crash-durability"
RECEIVE_VT = 2  # seconds: short, so abandoned messages come back and are received again
EXTEND_VT = 4  # ChangeMessageVisibility to extend before deleting
SAFETY_MARGIN = 0.25  # seconds kept between a delete and the end of its visibility window

__all__ = ["ACKED", "REFUSED", "UNKNOWN", "Figures", "Ledger", "crash_run", "drain", "verify"]


# --- clients that follow the restarts ------------------------------------------------


class SharedEndpoint:
    """The current server's endpoint; the killer changes it, the workers follow."""

    def __init__(self, endpoint: str) -> None:
        self._lock = threading.Lock()
        self._endpoint = endpoint
        self._generation = 0

    def set(self, endpoint: str) -> None:
        with self._lock:
            self._endpoint = endpoint
            self._generation += 1

    def get(self) -> tuple[int, str]:
        with self._lock:
            return self._generation, self._endpoint


class _ThreadClient:
    """One boto3 client per worker, rebuilt when the endpoint changes."""

    def __init__(self, shared: SharedEndpoint) -> None:
        self._shared = shared
        self._generation = -1
        self.client: Any = None
        self.queue_url = ""

    def refresh(self) -> None:
        generation, endpoint = self._shared.get()
        if generation != self._generation:
            self.client = make_client(endpoint)
            self.queue_url = f"{endpoint}/{ACCOUNT}/{QUEUE_NAME}"
            self._generation = generation


# --- the workers -------------------------------------------------------------------


class Workload:
    def __init__(self, shared: SharedEndpoint, ledger: Ledger, producers: int = 2, consumers: int = 3,
                 seed: int | None = None) -> None:
        self.shared = shared
        self.ledger = ledger
        self.stop_event = threading.Event()
        self.failures: list[BaseException] = []
        self._seed = seed if seed is not None else random.randrange(1 << 30)
        self._threads = [threading.Thread(target=self._guard, args=(self._produce, i), daemon=True,
                                          name=f"producer-{i}") for i in range(producers)]
        self._threads += [threading.Thread(target=self._guard, args=(self._consume, i), daemon=True,
                                           name=f"consumer-{i}") for i in range(consumers)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 30) -> None:
        self.stop_event.set()
        for t in self._threads:
            t.join(timeout)
            if t.is_alive():
                self.failures.append(RuntimeError(f"{t.name} did not stop within {timeout}s"))

    def _guard(self, fn: Any, index: int) -> None:
        try:
            fn(index)
        except BaseException as exc:  # noqa: BLE001
            self.failures.append(exc)

    def _pause_after_failure(self) -> None:
        self.stop_event.wait(0.05)

    # producers: producer 0 sends one at a time, the others in batches of up to 10
    def _produce(self, index: int) -> None:
        rng = random.Random(self._seed * 31 + index)
        tc = _ThreadClient(self.shared)
        prefix = f"p{index}-{uuid.uuid4().hex[:8]}"
        n = 0
        while not self.stop_event.is_set():
            tc.refresh()
            if index == 0:
                n += 1
                body = f"{prefix}-{n}-{'x' * rng.randrange(0, 300)}"
                started = time.time()
                try:
                    resp = tc.client.send_message(QueueUrl=tc.queue_url, MessageBody=body)
                except Exception as exc:  # noqa: BLE001
                    outcome = self.ledger.failed("SendMessage", exc)
                    self.ledger.send(body, outcome, None, (started, time.time(), tc.queue_url))
                    self._pause_after_failure()
                else:
                    self.ledger.note("SendMessage", ACKED)
                    self.ledger.send(body, ACKED, resp["MessageId"], (started, time.time(), tc.queue_url))
            else:
                entries = []
                for i in range(rng.randrange(1, 11)):
                    n += 1
                    entries.append({"Id": f"e{i}", "MessageBody": f"{prefix}-{n}-{'y' * rng.randrange(0, 300)}"})
                started = time.time()
                try:
                    resp = tc.client.send_message_batch(QueueUrl=tc.queue_url, Entries=entries)
                except Exception as exc:  # noqa: BLE001
                    outcome = self.ledger.failed("SendMessageBatch", exc)
                    when = (started, time.time(), tc.queue_url)
                    for e in entries:
                        self.ledger.send(e["MessageBody"], outcome, None, when)
                    self._pause_after_failure()
                else:
                    self.ledger.note("SendMessageBatch", ACKED)
                    when = (started, time.time(), tc.queue_url)
                    by_id = {e["Id"]: e["MessageBody"] for e in entries}
                    for ok in resp.get("Successful", []):
                        self.ledger.send(by_id.pop(ok["Id"]), ACKED, ok["MessageId"], when)
                    for bad in resp.get("Failed", []):
                        self.ledger.note("SendMessageBatch.entry", REFUSED, bad.get("Code"))
                        self.ledger.send(by_id.pop(bad["Id"]), REFUSED, None, when)
                    for body in by_id.values():  # an entry the response left out: unknown
                        self.ledger.send(body, UNKNOWN, None, when)
                self.stop_event.wait(0.01)

    # consumers: receive, then per message delete / extend-and-delete / release / abandon
    def _consume(self, index: int) -> None:
        rng = random.Random(self._seed * 17 + 1000 + index)
        tc = _ThreadClient(self.shared)
        while not self.stop_event.is_set():
            tc.refresh()
            sent_at = time.time()
            try:
                resp = tc.client.receive_message(
                    QueueUrl=tc.queue_url, MaxNumberOfMessages=rng.randrange(1, 11),
                    VisibilityTimeout=RECEIVE_VT, WaitTimeSeconds=rng.choice((0, 0, 1)),
                    MessageSystemAttributeNames=["ApproximateReceiveCount"])
            except Exception as exc:  # noqa: BLE001
                self.ledger.failed("ReceiveMessage", exc)
                self._pause_after_failure()
                continue
            answered_at = time.time()
            self.ledger.note("ReceiveMessage", ACKED)
            messages = resp.get("Messages", [])
            self.ledger.received(messages, sent_at, answered_at)
            # The receive claimed each message at a server time >= sent_at, so it stays
            # ours (its handle current) until at least sent_at + RECEIVE_VT.
            held = [{"mid": m["MessageId"], "handle": m["ReceiptHandle"],
                     "safe_until": sent_at + RECEIVE_VT - SAFETY_MARGIN} for m in messages]
            to_delete, to_extend, to_release = [], [], []
            for h in held:
                r = rng.random()
                if r < 0.55:
                    to_delete.append(h)
                elif r < 0.70:
                    to_extend.append(h)
                elif r < 0.85:
                    to_release.append(h)
                # else: abandoned; it shows again after the visibility timeout
            if to_extend:
                self._change_visibility(tc, rng, to_extend, EXTEND_VT)
                to_delete.extend(to_extend)
            if to_release:
                self._change_visibility(tc, rng, to_release, 0)
            if to_delete:
                self._delete(tc, rng, to_delete)

    def _change_visibility(self, tc: _ThreadClient, rng: random.Random, held: list[dict[str, Any]],
                           seconds: int) -> None:
        live = [h for h in held if time.time() < h["safe_until"]]
        if not live:
            return
        sent_at = time.time()
        # After an acknowledged change the message is ours until >= sent_at + seconds;
        # after an unknown one, until the earlier of that and what we had.
        new_safe = sent_at + seconds - SAFETY_MARGIN
        if len(live) > 1 and rng.random() < 0.5:
            entries = [{"Id": f"c{i}", "ReceiptHandle": h["handle"], "VisibilityTimeout": seconds}
                       for i, h in enumerate(live)]
            try:
                resp = tc.client.change_message_visibility_batch(QueueUrl=tc.queue_url, Entries=entries)
            except Exception as exc:  # noqa: BLE001
                outcome = self.ledger.failed("ChangeMessageVisibilityBatch", exc)
                if outcome == UNKNOWN:
                    for h in live:
                        h["safe_until"] = min(h["safe_until"], new_safe)
                return
            self.ledger.note("ChangeMessageVisibilityBatch", ACKED)
            for ok in resp.get("Successful", []):
                live[int(ok["Id"][1:])]["safe_until"] = new_safe
            for bad in resp.get("Failed", []):
                self.ledger.note("ChangeMessageVisibilityBatch.entry", REFUSED, bad.get("Code"))
            return
        for h in live:
            sent_at = time.time()
            new_safe = sent_at + seconds - SAFETY_MARGIN
            try:
                tc.client.change_message_visibility(QueueUrl=tc.queue_url, ReceiptHandle=h["handle"],
                                                    VisibilityTimeout=seconds)
            except Exception as exc:  # noqa: BLE001
                outcome = self.ledger.failed("ChangeMessageVisibility", exc)
                if outcome == UNKNOWN:
                    h["safe_until"] = min(h["safe_until"], new_safe)
                continue
            self.ledger.note("ChangeMessageVisibility", ACKED)
            h["safe_until"] = new_safe

    def _delete(self, tc: _ThreadClient, rng: random.Random, held: list[dict[str, Any]]) -> None:
        live = [h for h in held if time.time() < h["safe_until"]]
        if not live:
            return
        if len(live) > 1 and rng.random() < 0.5:
            entries = [{"Id": f"d{i}", "ReceiptHandle": h["handle"]} for i, h in enumerate(live)]
            try:
                resp = tc.client.delete_message_batch(QueueUrl=tc.queue_url, Entries=entries)
            except Exception as exc:  # noqa: BLE001
                outcome = self.ledger.failed("DeleteMessageBatch", exc)
                for h in live:
                    self.ledger.delete(h["mid"], outcome, time.time(), h["safe_until"])
                return
            answered_at = time.time()
            self.ledger.note("DeleteMessageBatch", ACKED)
            for ok in resp.get("Successful", []):
                h = live[int(ok["Id"][1:])]
                self.ledger.delete(h["mid"], ACKED, answered_at, h["safe_until"])
            for bad in resp.get("Failed", []):
                self.ledger.note("DeleteMessageBatch.entry", REFUSED, bad.get("Code"))
            return
        for h in live:
            try:
                tc.client.delete_message(QueueUrl=tc.queue_url, ReceiptHandle=h["handle"])
            except Exception as exc:  # noqa: BLE001
                outcome = self.ledger.failed("DeleteMessage", exc)
                self.ledger.delete(h["mid"], outcome, time.time(), h["safe_until"])
                continue
            self.ledger.note("DeleteMessage", ACKED)
            self.ledger.delete(h["mid"], ACKED, time.time(), h["safe_until"])

    def disruptions(self, count: int, rng: random.Random,
                    seconds_between: tuple[float, float]) -> Iterator[int]:
        """Yield 0..count-1, each after a random pause under load (wall time: the load is real), stopping
        early once the workload has failed."""
        for k in range(count):
            time.sleep(rng.uniform(*seconds_between))
            if self.failures:
                return
            yield k


# --- the end: drain and check -------------------------------------------------------

def drain(endpoint: str, ledger: Ledger) -> dict[str, tuple[str, int]]:
    """Receive everything (deleting as we go); returns body -> (MessageId, receive count).

    Each receive is recorded as an observation too, so its count is checked against
    everything seen before. Raises if a body shows up twice.
    """
    client = make_client(endpoint, read_timeout=60)
    url = f"{endpoint}/{ACCOUNT}/{QUEUE_NAME}"
    drained: dict[str, tuple[str, int]] = {}
    duplicates: list[str] = []
    counted = client.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    while True:
        sent_at = time.time()
        messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=43200,
                                          WaitTimeSeconds=0,
                                          MessageSystemAttributeNames=["ApproximateReceiveCount"]
                                          ).get("Messages", [])
        if not messages:
            break
        ledger.received(messages, sent_at, time.time())
        for m in messages:
            if m["Body"] in drained:
                duplicates.append(m["Body"])
            drained[m["Body"]] = (m["MessageId"], int(m["Attributes"]["ApproximateReceiveCount"]))
        resp = client.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
        if resp.get("Failed"):
            raise AssertionError(f"drain deletes failed: {resp['Failed']}")
    attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    if any(int(v) for v in attrs.values()):
        raise AssertionError(f"the queue is not empty after the drain: {attrs}")
    if duplicates:
        raise AssertionError(f"{len(duplicates)} bodies were received twice in the drain: {duplicates[:5]}")
    # Past every visibility timeout: what was counted visible is exactly what the receives returned.
    if (int(counted["ApproximateNumberOfMessages"]), int(counted["ApproximateNumberOfMessagesNotVisible"])) \
            != (len(drained), 0):
        raise AssertionError(f"counted {counted} before the drain, which received {len(drained)}")
    return drained


@contextlib.contextmanager
def kept_servers(say: Any) -> Iterator[list[Any]]:
    """The servers a run starts: if the run fails, the last three's stderr is said; all are killed at the end."""
    servers: list[Any] = []
    try:
        yield servers
    except BaseException:
        say_last_stderr(servers, say)
        raise
    finally:
        for s in servers:
            s.kill()


def say_last_stderr(servers: list[Any], say: Any) -> None:
    """After a failed run: the stderr of the last three servers, where the cause usually is."""
    for s in servers[-3:]:
        say(f"--- stderr of server pid {s.pid} ---\n{s.stderr_text()[-3000:]}")


def crash_run(workdir: str | os.PathLike[str], kills: int, seconds_between: tuple[float, float],
              log: Any = None, producers: int = 2, consumers: int = 3, seed: int | None = None) -> Figures:
    """The whole thing: serve, load, SIGKILL/restart `kills` times, drain, verify."""
    say = log or (lambda _msg: None)
    db = Path(workdir) / "crash.db"
    rng = random.Random(seed)
    with kept_servers(say) as servers:
        server = start_server(db, strict=False)
        servers.append(server)
        make_client(server.endpoint).create_queue(QueueName=QUEUE_NAME)
        shared = SharedEndpoint(server.endpoint)
        ledger = Ledger()
        workload = Workload(shared, ledger, producers=producers, consumers=consumers, seed=seed)
        workload.start()
        try:
            for k in workload.disruptions(kills, rng, seconds_between):
                ledger.events.append((time.time(), f"kill {server.endpoint}"))
                server.kill()
                server = start_server(db, strict=False)
                servers.append(server)
                shared.set(server.endpoint)
                ledger.events.append((time.time(), f"ready {server.endpoint}"))
                if (k + 1) % 10 == 0 or k + 1 == kills:
                    with ledger.lock:
                        acked = sum(1 for o, _ in ledger.sends.values() if o == ACKED)
                    say(f"kill {k + 1}/{kills}: {acked} sends acknowledged so far")
            time.sleep(rng.uniform(*seconds_between))
            server.kill()  # the last one dies under load too
        finally:
            workload.stop()
        if workload.failures:
            raise RuntimeError(f"a worker failed: {workload.failures!r}")
        checker = start_server(db, "--test-clock", strict=False)
        servers.append(checker)
        advance_clock(checker.endpoint, 13 * 3600)  # past every visibility timeout, inside retention
        drained = drain(checker.endpoint, ledger)
        rc = checker.stop()
        if rc != 0:
            raise ServerError(f"the final server exited {rc} after SIGTERM\n{checker.stderr_text()}")
        return verify(ledger, drained, kills + 1, integrity(db))
