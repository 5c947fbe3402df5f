"""Success deletes; failure follows the policy; the queue's RedrivePolicy takes poison messages away.

Timings come from the server's test clock: a message's return is checked one second
before and at the moment the policy says, never by sleeping.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from support.sqs import arn_of, visible_and_in_flight
from support.workers import receive_now, wait_for

from queueserver.consumer import ExponentialBackoff, MakeVisibleNow, Outcome
from queueserver.consumer.policies import receive_count


class Attempts:
    """A handler that records each attempt's receive count and fails the first `failures` attempts."""

    def __init__(self, failures: int, fail_with: str = "raise") -> None:
        self.failures = failures
        self.fail_with = fail_with
        self.counts: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, message: dict[str, Any]) -> Any:
        with self._lock:
            self.counts.append(receive_count(message))
            attempt = len(self.counts)
        if attempt <= self.failures:
            if self.fail_with == "raise":
                raise RuntimeError(f"attempt {attempt} fails")
            return Outcome.FAILED
        return None


def count_calls(client: Any, operation: str) -> list[int]:
    """Records the number of entries (or 1) of each `operation` call the client makes."""
    calls: list[int] = []
    client.meta.events.register(f"before-parameter-build.sqs.{operation}",
                                lambda params, **_: calls.append(len(params.get("Entries", [None]))))
    return calls


def test_successes_are_deleted_in_delete_message_batch_calls(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    for start in (0, 10, 20):
        worker_sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{start + i}"}
                                                      for i in range(10)])
    batches, singles = count_calls(worker_sqs, "DeleteMessageBatch"), count_calls(worker_sqs, "DeleteMessage")
    worker = start_worker(worker_sqs, url, lambda message: None, max_concurrency=5)
    wait_for(lambda: worker.counters.deleted == 30, "thirty deletes")
    assert sum(batches) == 30 and max(batches) <= 10
    assert singles == []
    assert visible_and_in_flight(worker_sqs, url) == (0, 0)
    assert worker.counters.succeeded == 30 and worker.counters.failed == 0


def test_by_default_a_failed_message_is_left_to_expire_and_returns_after_its_visibility_timeout(
        worker_sqs, make_worker_queue, server_clock, start_worker):
    url = make_worker_queue()
    handler = Attempts(failures=1)
    changes = count_calls(worker_sqs, "ChangeMessageVisibilityBatch")
    worker = start_worker(worker_sqs, url, handler, max_concurrency=1)
    worker_sqs.send_message(QueueUrl=url, MessageBody="flaky")
    wait_for(lambda: worker.counters.failed == 1, "the first failure")
    assert visible_and_in_flight(worker_sqs, url) == (0, 1)
    server_clock.advance(29)
    assert visible_and_in_flight(worker_sqs, url) == (0, 1), "still within its 30 s"
    server_clock.advance(2)
    wait_for(lambda: worker.counters.deleted == 1, "the second attempt's delete")
    assert handler.counts == [1, 2]
    assert changes == [], "leaving a message to expire needs no call"


def test_the_make_visible_now_policy_redelivers_a_failed_message_at_once(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    handler = Attempts(failures=2)
    worker = start_worker(worker_sqs, url, handler, failure_policy=MakeVisibleNow())
    worker_sqs.send_message(QueueUrl=url, MessageBody="flaky")
    wait_for(lambda: worker.counters.deleted == 1, "the third attempt's delete")  # the clock never moved
    assert handler.counts == [1, 2, 3]
    assert worker.counters.failed == 2 and worker.counters.succeeded == 1


def test_a_handler_that_returns_failed_fails_its_message_without_raising(worker_sqs, make_worker_queue, start_worker):
    url = make_worker_queue()
    handler = Attempts(failures=1, fail_with="status")
    worker = start_worker(worker_sqs, url, handler, failure_policy=MakeVisibleNow())
    worker_sqs.send_message(QueueUrl=url, MessageBody="declined once")
    wait_for(lambda: worker.counters.deleted == 1, "the second attempt's delete")
    assert handler.counts == [1, 2]
    assert worker.counters.failed == 1


def test_exponential_backoff_hides_a_failed_message_longer_after_each_receive_up_to_its_cap(
        worker_sqs, make_worker_queue, server_clock, start_worker):
    url = make_worker_queue()
    handler = Attempts(failures=4)
    changes = count_calls(worker_sqs, "ChangeMessageVisibilityBatch")
    applied: list[int] = []
    worker_sqs.meta.events.register("after-call.sqs.ChangeMessageVisibilityBatch", lambda **_: applied.append(1))
    policy = ExponentialBackoff(initial_seconds=10, multiplier=2, max_seconds=30)
    worker = start_worker(worker_sqs, url, handler, failure_policy=policy, max_concurrency=1)
    worker_sqs.send_message(QueueUrl=url, MessageBody="backs off")
    for attempt, delay in enumerate([10, 20, 30, 30], start=1):  # 10 * 2 ** (receives - 1), capped at 30
        wait_for(lambda: len(applied) == attempt, f"the visibility change after failure {attempt}")  # noqa: B023
        server_clock.advance(delay - 1)
        assert visible_and_in_flight(worker_sqs, url) == (0, 1), f"back after less than {delay} s"
        assert len(handler.counts) == attempt
        server_clock.advance(1)
        wait_for(lambda: len(handler.counts) == attempt + 1, f"attempt {attempt + 1}")  # noqa: B023
    wait_for(lambda: worker.counters.deleted == 1, "the fifth attempt's delete")
    assert handler.counts == [1, 2, 3, 4, 5]
    assert changes == [1, 1, 1, 1]


def _queue_with_dead_letter_queue(worker_sqs: Any, make_worker_queue: Any, max_receive_count: int) -> tuple[str, str]:
    dead_letter_url = make_worker_queue()
    arn = arn_of(worker_sqs, dead_letter_url)
    source_url = make_worker_queue({"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn,
                                                          "maxReceiveCount": str(max_receive_count)})})
    return source_url, dead_letter_url


def test_a_message_that_keeps_failing_reaches_the_dead_letter_queue_after_max_receive_count(
        worker_sqs, make_worker_queue, start_worker):
    url, dead_letter_url = _queue_with_dead_letter_queue(worker_sqs, make_worker_queue, max_receive_count=3)
    handler = Attempts(failures=1_000)
    worker = start_worker(worker_sqs, url, handler, failure_policy=MakeVisibleNow())
    worker_sqs.send_message(QueueUrl=url, MessageBody="poison")
    (moved,) = wait_for(lambda: receive_now(worker_sqs, dead_letter_url), "the message in the dead-letter queue")
    assert moved["Body"] == "poison"
    assert handler.counts == [1, 2, 3]
    assert worker.counters.failed == 3
    assert visible_and_in_flight(worker_sqs, url) == (0, 0)


def test_with_the_default_policy_a_poison_message_reaches_the_dead_letter_queue_as_each_visibility_ends(
        worker_sqs, make_worker_queue, server_clock, start_worker):
    url, dead_letter_url = _queue_with_dead_letter_queue(worker_sqs, make_worker_queue, max_receive_count=2)
    handler = Attempts(failures=1_000)
    worker = start_worker(worker_sqs, url, handler, max_concurrency=1)
    worker_sqs.send_message(QueueUrl=url, MessageBody="poison")
    wait_for(lambda: worker.counters.failed == 1, "the first failure")
    server_clock.advance(31)
    wait_for(lambda: worker.counters.failed == 2, "the second failure")
    assert receive_now(worker_sqs, dead_letter_url) == []
    server_clock.advance(31)
    (moved,) = wait_for(lambda: receive_now(worker_sqs, dead_letter_url), "the message in the dead-letter queue")
    assert moved["Body"] == "poison"
    assert handler.counts == [1, 2]
