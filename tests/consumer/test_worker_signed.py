"""The worker against a server with credentials on: boto3 signs, and a least-privilege key is enough."""

from __future__ import annotations

from typing import Any

from support.auth import JOBS_QUEUE, signed_client, write_credentials
from support.server import start
from support.sqs import visible_and_in_flight
from support.workers import WAIT_TIMEOUT_S, wait_for

from queueserver.consumer import Worker


def test_a_worker_with_a_key_limited_to_its_queue_consumes_it(tmp_path):
    server = start(tmp_path / "signed.db", "--credentials", str(write_credentials(tmp_path / "keys.toml")))
    try:
        alice = signed_client("json", server.endpoint, "AKIDALICE")
        url = alice.create_queue(QueueName=JOBS_QUEUE)["QueueUrl"]
        alice.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"job {i}"} for i in range(5)])
        seen: list[str] = []

        def handler(message: dict[str, Any]) -> None:
            seen.append(message["Body"])

        worker = Worker(signed_client("json", server.endpoint, "AKIDWORKER"), url, handler,
                        wait_time_seconds=1, visibility_timeout=30)
        worker.start()
        try:
            wait_for(lambda: worker.counters.deleted == 5, "five deletes")
        finally:
            worker.stop()
            assert worker.join(timeout=WAIT_TIMEOUT_S), "the worker did not stop"
        assert sorted(seen) == [f"job {i}" for i in range(5)]
        assert worker.counters.failed == 0
        assert visible_and_in_flight(alice, url) == (0, 0)
    finally:
        assert server.stop() == 0
