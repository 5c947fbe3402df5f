#!/usr/bin/env python3
"""CPU per request of the dispatcher alone, per wire protocol: `Dispatcher.handle` around a no-op handler.

    PYTHONPATH=<checkout> .venv/bin/python scripts/dispatch_cost.py

In-process, no HTTP and no database: what the protocol layer costs a request (detecting the
protocol, finding the action, decoding, rendering, the error path). The engine is a stand-in
whose `durable()` returns at once; ListQueues is swapped for a handler that returns a constant.
Prints the minimum over 15 runs of 20,000 calls each; run it against two checkouts in turn.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from queueserver.protocol import dispatch
from queueserver.protocol.dispatch import Dispatcher, HttpRequest

CALLS, RUNS = 20_000, 15


class _Clock:
    def now_ms(self) -> int:
        return 0


class _Engine:
    clock = _Clock()

    async def durable(self) -> None:
        return None


async def _no_op(engine: Any, context: Any, params: dict[str, Any]) -> dict[str, Any]:
    return {"QueueUrls": []}


def _requests() -> dict[str, HttpRequest]:
    json_headers = {"x-amz-target": "AmazonSQS.ListQueues", "content-type": "application/x-amz-json-1.0",
                    "host": "localhost"}
    form = {"content-type": "application/x-www-form-urlencoded", "host": "localhost"}
    query_body = b"Action=ListQueues&Version=2012-11-05&QueueNamePrefix=a"
    return {
        "json": HttpRequest("POST", "/", json_headers, b'{"QueueNamePrefix":"a"}', "http", "localhost:1"),
        "query-xml": HttpRequest("POST", "/", form, query_body, "http", "localhost:1"),
        "query-json": HttpRequest("POST", "/", {**form, "accept": "application/json"}, query_body, "http",
                                  "localhost:1"),
        "json-error": HttpRequest("POST", "/", {**json_headers, "x-amz-target": "AmazonSQS.Nope"}, b"{}", "http",
                                  "localhost:1"),
    }


async def main() -> None:
    dispatch.ACTIONS["ListQueues"] = _no_op
    dispatcher = Dispatcher(_Engine(), "us-east-1", "000000000000")  # type: ignore[arg-type]
    for name, request in _requests().items():
        best = float("inf")
        for _ in range(RUNS):
            started = time.process_time()
            for _ in range(CALLS):
                await dispatcher.handle(request)
            best = min(best, time.process_time() - started)
        print(f"{name:11s} {best / CALLS * 1e6:6.2f} us/request")


if __name__ == "__main__":
    asyncio.run(main())
