"""The dispatcher is the gate: no answer leaves it before what it reports is on disk.

A real engine on a real file, with the log sync injected (held back, or failing).
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from queueserver.clock import ManualClock
from queueserver.protocol import Dispatcher, HttpRequest
from queueserver.storage import QueueEngine

WAIT = 10.0


class HeldSync:
    def __init__(self) -> None:
        self.go = threading.Event()
        self.go.set()
        self.started = threading.Event()
        self.failure: OSError | None = None

    def __call__(self, fd: int) -> None:
        self.started.set()
        assert self.go.wait(WAIT), "the test never let the sync finish"
        if self.failure is not None:
            raise self.failure


def request(action: str, params: dict[str, Any]) -> HttpRequest:
    return HttpRequest(method="POST", path="/", body=json.dumps(params).encode(), scheme="http",
                       default_host="localhost:9324",
                       headers={"x-amz-target": f"AmazonSQS.{action}", "content-type": "application/x-amz-json-1.0"})


def run(tmp_path: Path, scenario: Any) -> Any:
    async def main() -> Any:
        sync = HeldSync()
        engine = await QueueEngine.open(str(tmp_path / "q.db"), ManualClock(), sync_log=sync)
        try:
            dispatcher = Dispatcher(engine, "us-east-1", "000000000000")
            created = await dispatcher.handle(request("CreateQueue", {"QueueName": "q"}))
            url = json.loads(created.body)["QueueUrl"]
            return await scenario(dispatcher, sync, url)
        finally:
            sync.go.set()
            await engine.close()

    return asyncio.run(main())


def test_a_send_is_answered_only_once_its_commit_is_synced(tmp_path: Path) -> None:
    async def scenario(dispatcher: Dispatcher, sync: HeldSync, url: str) -> None:
        sync.go.clear()
        sync.started.clear()
        answer = asyncio.ensure_future(dispatcher.handle(request("SendMessage", {"QueueUrl": url, "MessageBody": "m"})))
        assert await asyncio.to_thread(sync.started.wait, WAIT), "the send's commit was never synced"
        # A round trip through the database thread, whose result comes after the send's: by then
        # the send has taken every step its commit allowed.
        await dispatcher._engine._db.run(lambda tx: None)
        assert not answer.done(), "answered while the log sync was held back"
        sync.go.set()
        response = await asyncio.wait_for(answer, WAIT)
        assert response.status == 200 and "MessageId" in json.loads(response.body)

    run(tmp_path, scenario)


def test_a_failed_sync_turns_the_answer_into_a_503_in_either_wire_format(tmp_path: Path) -> None:
    async def scenario(dispatcher: Dispatcher, sync: HeldSync, url: str) -> None:
        sync.failure = OSError(28, "No space left on device")
        response = await dispatcher.handle(request("SendMessage", {"QueueUrl": url, "MessageBody": "m"}))
        assert response.status == 503
        assert json.loads(response.body)["__type"] == "com.amazonaws.sqs#ServiceUnavailable"
        assert "Restart the server" in json.loads(response.body)["message"]
        query = HttpRequest(method="POST", path="/", body=b"Action=GetQueueUrl&QueueName=q", scheme="http",
                            default_host="localhost:9324",
                            headers={"content-type": "application/x-www-form-urlencoded"})
        response = await dispatcher.handle(query)
        assert response.status == 503 and b"<Code>ServiceUnavailable</Code>" in response.body

    run(tmp_path, scenario)
