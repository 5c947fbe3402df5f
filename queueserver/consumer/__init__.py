"""queueserver.consumer: a worker library for SQS queues, on boto3.

It talks to a queue only through a boto3 SQS client that you give it, so the same
worker runs against queueserver (endpoint_url=...) and against AWS SQS unchanged.

    from queueserver.consumer import Worker, MakeVisibleNow

    def handle(message):
        process(message["Body"])  # return to succeed (the message is deleted); raise to fail

    Worker(boto3.client("sqs"), queue_url, handle, failure_policy=MakeVisibleNow()).run()
"""

from queueserver.consumer.hooks import WorkerCounters, WorkerHooks
from queueserver.consumer.policies import (
    ExponentialBackoff,
    FailurePolicy,
    LeaveToExpire,
    MakeVisibleNow,
    Outcome,
)
from queueserver.consumer.timing import MonotonicClock
from queueserver.consumer.worker import Worker

__all__ = [
    "ExponentialBackoff",
    "FailurePolicy",
    "LeaveToExpire",
    "MakeVisibleNow",
    "MonotonicClock",
    "Outcome",
    "Worker",
    "WorkerCounters",
    "WorkerHooks",
]
