"""What no outside fault can stage on demand: a failed fsync and a background task that died turn
readiness off; and two servers' metrics in one process (a registry per app, none global)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from queueserver import errors
from queueserver.clock import ManualClock
from queueserver.metrics import Metrics
from queueserver.storage import QueueEngine
from queueserver.tallies import ConnectionTally, RequestTally


class FailingSync:
    def __init__(self) -> None:
        self.fail = False

    def __call__(self, fd: int) -> None:
        if self.fail:
            raise OSError(5, "Input/output error")


def sent_by_queue(text: str) -> dict[str, float]:
    return {sample.labels["queue"]: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "queueserver_messages_sent_total"}


def test_after_a_failed_fsync_the_server_is_not_ready_and_the_failure_is_counted(tmp_path: Path) -> None:
    async def main() -> None:
        sync = FailingSync()
        engine = await QueueEngine.open(str(tmp_path / "q.db"), ManualClock(), sync_log=sync)
        try:
            assert await engine.observe.unready() == []
            sync.fail = True
            # a write's sync fails (the readiness probe just ran: its next one waits a second)
            await engine.create_queue("us-east-1", "000000000000", "synced", fifo=False, attributes={},
                                      supplied={}, tags={})
            with pytest.raises(errors.ServiceUnavailable):
                await engine.durable()
            problems = await engine.observe.unready()
            assert problems and "Restart the server" in problems[0], problems
            assert engine.observe.storage.failed_fsyncs == 1
            assert await engine.observe.unready() == problems, "it stays unready until a restart"
        finally:
            await engine.close()

    asyncio.run(main())


def test_a_background_task_that_died_makes_the_server_unready(tmp_path: Path) -> None:
    async def main() -> None:
        engine = await QueueEngine.open(str(tmp_path / "q.db"), ManualClock())
        try:
            async def dies() -> None:
                raise RuntimeError("boom")

            task = asyncio.create_task(dies())
            engine.health.watch_task(task, "a test worker")
            await asyncio.gather(task, return_exceptions=True)
            await asyncio.sleep(0)  # done callbacks run as a loop step
            assert await engine.observe.unready() == ["a test worker ended (RuntimeError: boom)"]
        finally:
            await engine.close()

    asyncio.run(main())


def test_two_servers_in_one_process_each_export_their_own_metrics(tmp_path: Path) -> None:
    async def main() -> None:
        engines = [await QueueEngine.open(str(tmp_path / f"{name}.db"), ManualClock()) for name in ("a", "b")]
        try:
            for engine, name in zip(engines, ("a", "b")):
                queue = await engine.create_queue("us-east-1", "000000000000", name, fifo=False, attributes={},
                                                   supplied={}, tags={})
                assert queue.name == name
            metrics = [Metrics(engine, RequestTally(), ConnectionTally(), max_queues=10) for engine in engines]
            texts = [(await m.exposition(""))[0].decode() for m in metrics]
            assert sent_by_queue(texts[0]) == {"a": 0} and sent_by_queue(texts[1]) == {"b": 0}
        finally:
            for engine in engines:
                await engine.close()

    asyncio.run(main())
