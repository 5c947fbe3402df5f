"""Runs the server: opens the engine, serves HTTP, prints READY, shuts down cleanly."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from typing import Any

import uvicorn

from queueserver.app import create_app
from queueserver.clock import Clock, ManualClock, SystemClock
from queueserver.config import ServerConfig
from queueserver.storage import QueueEngine

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn, plus the READY line and long polls that end when shutdown begins."""

    def __init__(self, config: uvicorn.Config, engine: QueueEngine, host: str) -> None:
        super().__init__(config)
        self._engine = engine
        self._host = host

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        port = self.servers[0].sockets[0].getsockname()[1]
        sys.stdout.write(f"READY http://{self._host}:{port}\n")
        sys.stdout.flush()

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signal once serving stops, which would kill the process
        # before the database is closed; the shutdown is clean, so exit 0 instead.
        self._captured_signals.clear()
        self._engine.begin_shutdown()


async def serve(config: ServerConfig) -> None:
    clock: Clock = ManualClock() if config.test_clock else SystemClock()
    engine = await QueueEngine.open(
        config.db_path, clock, enforce_cooldowns=config.enforce_cooldowns,
        in_flight_limit=config.in_flight_limit, fifo_in_flight_limit=config.fifo_in_flight_limit)
    try:
        app = create_app(config, engine)
        # Start-up objects live for the whole run: keep the collector from scanning them again
        # and again (it took 3-4 % of the CPU under load).
        gc.freeze()
        gc.set_threshold(10_000, 20, 20)
        uvicorn_config = uvicorn.Config(
            app, host=config.host, port=config.port, access_log=False, log_level="warning",
            http="httptools", loop="none", lifespan="off", timeout_graceful_shutdown=30,
        )
        await _Server(uvicorn_config, engine, config.host).serve()
    finally:
        await engine.close()
        log.info("database closed")


def run(config: ServerConfig) -> None:
    try:
        import uvloop
    except ImportError:  # uvloop is not on every platform; asyncio works, slower
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
