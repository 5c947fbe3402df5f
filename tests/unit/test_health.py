"""The supervisor: a background task or thread that ends before shutdown is reported, loudly, once."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from queueserver.storage.health import Health


def test_a_task_that_dies_of_an_exception_is_reported_once_and_the_health_turns_bad(caplog):
    health = Health()

    async def main() -> None:
        async def dies() -> None:
            raise ValueError("boom")

        task = asyncio.create_task(dies())
        health.watch_task(task, "the retention sweeper")
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)  # done callbacks run as a loop step

    with caplog.at_level(logging.CRITICAL):
        asyncio.run(main())
    assert not health.healthy
    assert health.problems() == {"the retention sweeper": "ValueError: boom"}
    assert [r.levelno for r in caplog.records] == [logging.CRITICAL]
    assert "the retention sweeper ended while the server runs" in caplog.text


def test_a_task_that_may_return_is_reported_only_if_it_fails():
    health = Health()

    async def main() -> None:
        async def completes() -> None:
            return None

        task = asyncio.create_task(completes())
        health.watch_task(task, "move task 1", may_return=True)
        await task
        await asyncio.sleep(0)

    asyncio.run(main())
    assert health.healthy


def test_a_thread_that_ends_is_reported_with_its_exception():
    health = Health()

    def serve() -> None:
        raise RuntimeError("the connection went away")

    thread = threading.Thread(target=health.thread_target("the database thread", serve))
    thread.start()
    thread.join()
    assert health.problems() == {"the database thread": "RuntimeError: the connection went away"}


def test_nothing_is_reported_once_shutdown_has_begun():
    health = Health()

    async def main() -> None:
        task = asyncio.create_task(asyncio.Event().wait())  # runs until cancelled
        health.watch_task(task, "the retention sweeper")
        await asyncio.sleep(0)
        health.stopping = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)

    asyncio.run(main())
    assert health.healthy


@pytest.mark.parametrize("ending", ["returns", "raises"])
def test_a_thread_is_reported_however_it_ends(ending):
    health = Health()

    def target() -> None:
        if ending == "raises":
            raise OSError("gone")

    thread = threading.Thread(target=health.thread_target("the fsync thread", target))
    thread.start()
    thread.join()
    assert "the fsync thread" in health.problems()


def test_a_task_cancelled_before_shutdown_is_reported():
    health = Health()

    async def main() -> None:
        task = asyncio.create_task(asyncio.Event().wait())  # runs until cancelled
        health.watch_task(task, "the retention sweeper")
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)

    asyncio.run(main())
    assert health.problems() == {"the retention sweeper": "cancelled"}
