"""Many concurrent receivers on one FIFO queue.

Ten receiver threads, each with its own boto3 client, short-poll and long-poll one
FIFO queue of 20 groups x 15 messages. They delete most messages, release some
(ChangeMessageVisibility 0) and, now and then, "crash": take messages with a 1-second
visibility timeout and abandon them, so those come back when it expires. Every receive
is logged with the client-side hold interval of each message (see fifo_history for why
that check is sound), and the log must show:

* no group held by two receives at once, and no message handed out again while held;
* each receive of a group is the next not-yet-deleted messages of that group, in order
  (so failed messages come back before later ones);
* every message deleted exactly once.

These are the only FIFO tests on a real-time server: the visibility timeouts must run
out while the receivers work. Nothing here asserts how long anything took.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.fifo_history import Delivery, Got, History, message_held_twice, order_problems, overlapping_holds
from support.sqs import Counts, counts

pytestmark = pytest.mark.server_process

GROUPS = 20
PER_GROUP = 15
RECEIVERS = 10
VISIBILITY = 30  # a normal receive: never runs out while a receiver works
CRASH_VISIBILITY = 1  # a crashing receive abandons its messages; they return after 1 s
CRASHES = 12  # at most, across all receivers, so the test stays short
GIVE_UP_AFTER = 60.0  # a hard stop for a broken server; the test fails if it is reached
SYSTEM_ATTRIBUTES = ["MessageGroupId", "SequenceNumber", "ApproximateReceiveCount"]


class Run:
    """Shared state of one concurrent run."""

    def __init__(self, url: str, total: int) -> None:
        self.url = url
        self.total = total
        self.history = History()
        self.deleted = 0
        self.crashes = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.errors: list[BaseException] = []
        self.deadline = time.monotonic() + GIVE_UP_AFTER

    def count_delete(self) -> None:
        with self.lock:
            self.deleted += 1
            if self.deleted >= self.total:
                self.done.set()

    def take_crash(self) -> bool:
        with self.lock:
            if self.crashes >= CRASHES:
                return False
            self.crashes += 1
            return True


def receiver(run: Run, client: Any, number: int, long_polls: bool, seed: int) -> None:
    rng = random.Random(seed)
    try:
        while not run.done.is_set() and time.monotonic() < run.deadline:
            crash = rng.random() < 0.08 and run.take_crash()
            visibility = CRASH_VISIBILITY if crash else VISIBILITY
            wait = rng.choice([1, 2]) if long_polls else 0
            requested_at = time.monotonic()
            resp = client.receive_message(QueueUrl=run.url, MaxNumberOfMessages=rng.randint(1, 10),
                                          WaitTimeSeconds=wait, VisibilityTimeout=visibility,
                                          MessageSystemAttributeNames=SYSTEM_ATTRIBUTES)
            started = time.monotonic()
            messages = resp.get("Messages", [])
            if not messages:
                if not long_polls:
                    time.sleep(0.005)  # pacing for an empty short poll, not a timing assumption
                continue
            delivery = Delivery(number, requested_at, started, visibility, [
                Got(m["MessageId"], m["Attributes"]["MessageGroupId"], int(m["Attributes"]["SequenceNumber"]),
                    int(m["Attributes"]["ApproximateReceiveCount"])) for m in messages])
            run.history.add(delivery)
            if crash:
                continue  # abandoned: each message comes back when its visibility ends
            failed_groups: set[str] = set()
            pairs = list(zip(messages, delivery.messages))
            for n, (message, got) in enumerate(pairs):
                if got.group in failed_groups:
                    continue  # released with the message of its group that failed
                time.sleep(rng.uniform(0, 0.004))  # the work, so that holds last a little
                if got.receive_count <= 3 and rng.random() < 0.08:
                    # A FIFO consumer that fails a message fails the rest of its group in this receive too,
                    # the last first: a group is available again as soon as its first message is visible
                    # (observed on AWS), and the later ones must be visible by then.
                    failed_groups.add(got.group)
                    for later, later_got in reversed([p for p in pairs[n:] if p[1].group == got.group]):
                        release(run, client, later, later_got)
                    continue
                got.called_at = time.monotonic()
                try:
                    client.delete_message(QueueUrl=run.url, ReceiptHandle=message["ReceiptHandle"])
                except ClientError as exc:
                    if exc.response["Error"]["Code"] != "InvalidParameterValue":
                        raise
                    got.outcome = "expired-before-delete"  # it will be delivered again
                    failed_groups.add(got.group)
                    for later, later_got in reversed([p for p in pairs[n + 1:] if p[1].group == got.group]):
                        release(run, client, later, later_got)
                    continue
                got.outcome = "deleted"
                run.count_delete()
    except BaseException as exc:  # noqa: BLE001 - reported by the test thread
        run.errors.append(exc)
        run.done.set()


def release(run: Run, client: Any, message: dict[str, Any], got: Got) -> None:
    got.called_at = time.monotonic()
    got.outcome = "released"
    try:
        client.change_message_visibility(QueueUrl=run.url, ReceiptHandle=message["ReceiptHandle"],
                                         VisibilityTimeout=0)
    except ClientError as exc:  # its visibility ran out first: it is visible anyway
        got.outcome = "released-late:" + exc.response["Error"]["Code"]


def run_receivers(make_client: Any, endpoint: str, run: Run, long_polling: list[bool], seed: int) -> list[threading.Thread]:
    clients = [make_client(endpoint) for _ in long_polling]  # built here: client creation is not thread-safe
    threads = [threading.Thread(target=receiver, args=(run, client, n, long_polls, seed * 100 + n),
                                name=f"receiver-{n}", daemon=True)
               for n, (client, long_polls) in enumerate(zip(clients, long_polling))]
    for thread in threads:
        thread.start()
    return threads


def send_groups(client: Any, url: str, groups: list[str], per_group: int) -> dict[str, list[int]]:
    """SendMessageBatch of 10, each batch a slice of the groups at the same index; returns sequences per group."""
    entries = [(group, i) for i in range(per_group) for group in groups]
    sent: dict[str, list[int]] = {group: [] for group in groups}
    for start in range(0, len(entries), 10):
        chunk = entries[start:start + 10]
        resp = client.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"e{n}", "MessageBody": f"{group}:{i}", "MessageGroupId": group,
             "MessageDeduplicationId": uuid.uuid4().hex} for n, (group, i) in enumerate(chunk)])
        assert not resp.get("Failed"), resp["Failed"]
        by_id = {e["Id"]: e for e in resp["Successful"]}
        for n, (group, _) in enumerate(chunk):
            sent[group].append(int(by_id[f"e{n}"]["SequenceNumber"]))
    return sent


def finish(run: Run, threads: list[threading.Thread], sent: dict[str, list[int]]) -> None:
    finished = run.done.wait(timeout=max(0.0, run.deadline - time.monotonic()) + 1)
    run.done.set()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a receiver did not stop"
    if run.errors:
        raise run.errors[0]
    deliveries = run.history.deliveries
    problems = overlapping_holds(deliveries) + message_held_twice(deliveries) + order_problems(deliveries, sent)
    assert not problems, "\n".join(problems[:20])
    assert finished, f"only {run.deleted} of {run.total} messages were deleted within {GIVE_UP_AFTER} s"
    assert run.deleted == run.total
    receivers_used = {d.receiver for d in deliveries}
    assert len(receivers_used) >= 2, "the run was not concurrent"


@pytest.fixture
def real_time_server(server_factory: Any, tmp_path: Any) -> Any:
    return server_factory(tmp_path / "fifo-concurrency.db")


def test_concurrent_receivers_never_share_a_group_and_keep_each_groups_order(real_time_server, make_client):
    client = make_client(real_time_server.endpoint)
    url = client.create_queue(QueueName="concurrent.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    groups = [f"group-{n:02d}" for n in range(GROUPS)]
    sent = send_groups(client, url, groups, PER_GROUP)
    run = Run(url, GROUPS * PER_GROUP)
    threads = run_receivers(make_client, real_time_server.endpoint, run,
                            [n % 2 == 1 for n in range(RECEIVERS)], seed=4)
    finish(run, threads, sent)
    outcomes = [g.outcome for d in run.history.deliveries for g in d.messages]
    assert outcomes.count("deleted") == GROUPS * PER_GROUP
    assert counts(client, url) == Counts(0, 0, 0)


def test_long_polling_receivers_get_each_group_in_order_while_it_is_being_sent(real_time_server, make_client):
    client = make_client(real_time_server.endpoint)
    url = client.create_queue(QueueName="while-sending.fifo",
                              Attributes={"FifoQueue": "true", "DeduplicationScope": "messageGroup",
                                          "FifoThroughputLimit": "perMessageGroupId"})["QueueUrl"]
    groups = [f"tenant-{n:02d}" for n in range(GROUPS)]
    run = Run(url, GROUPS * PER_GROUP)
    threads = run_receivers(make_client, real_time_server.endpoint, run, [True] * RECEIVERS, seed=7)
    sent = send_groups(client, url, groups, PER_GROUP)  # the receivers are already waiting
    finish(run, threads, sent)
    assert counts(client, url) == Counts(0, 0, 0)


# --- the checks themselves catch what they are meant to catch ------------------------------


def _delivery(receiver: int, start: float, end: float, *messages: tuple[str, int, str]) -> Delivery:
    d = Delivery(receiver, requested_at=start - 0.01, started=start, visibility=30)
    for message_id, sequence, outcome in messages:
        d.messages.append(Got(message_id, "g", sequence, 1, outcome, called_at=end))
    return d


def test_the_history_check_catches_a_group_held_by_two_receivers_at_once():
    first = _delivery(1, 1.0, 2.0, ("m1", 1, "deleted"))
    second = _delivery(2, 1.5, 2.5, ("m2", 2, "deleted"))
    assert overlapping_holds([first, second])
    assert not overlapping_holds([first, _delivery(2, 2.1, 2.5, ("m2", 2, "deleted"))])


def test_the_history_check_catches_a_message_handed_out_again_while_held():
    first = _delivery(1, 1.0, 2.0, ("m1", 1, "released"))
    again = _delivery(2, 1.5, 2.5, ("m1", 1, "deleted"))
    assert message_held_twice([first, again])


def test_the_history_check_catches_a_skipped_or_reordered_message():
    sent = {"g": [1, 2, 3]}
    in_order = [_delivery(1, 1.0, 1.1, ("m1", 1, "deleted"), ("m2", 2, "released")),
                _delivery(2, 2.0, 2.1, ("m2", 2, "deleted"), ("m3", 3, "deleted"))]
    assert order_problems(in_order, sent) == []
    skipped = [_delivery(1, 1.0, 1.1, ("m1", 1, "released")),
               _delivery(2, 2.0, 2.1, ("m2", 2, "deleted"))]
    assert order_problems(skipped, sent)
    reordered = [_delivery(1, 1.0, 1.1, ("m2", 2, "deleted"), ("m1", 1, "deleted"))]
    assert order_problems(reordered, sent)
