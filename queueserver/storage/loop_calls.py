"""Handing results from the database and fsync threads to the event loops that wait for them."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Callable


def yield_to_the_event_loop() -> None:
    """Make this thread a batch thread (Linux): woken by a new operation, it does not preempt the
    event loop on a shared core, but runs when the loop next waits, and takes as one group what
    the loop read meanwhile. Measured on one core under 16 clients: a burst of 16 requests
    became one group and one fsync instead of a group of one and one of 15."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or not allowed: only the grouping suffers
        pass


def resolve(future: asyncio.Future, ok: bool, value: Any) -> None:
    if future.done():  # cancelled: its client has gone
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def call_on_loops(calls: list[tuple[asyncio.AbstractEventLoop, Callable[[], object]]]) -> None:
    """Run callbacks on their event loops, in order: one wake-up of each loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Callable[[], object]]] = {}
    for loop, callback in calls:
        by_loop.setdefault(loop, []).append(callback)

    def run_all(callbacks: list[Callable[[], object]]) -> None:
        for callback in callbacks:
            callback()

    for loop, callbacks in by_loop.items():
        try:
            loop.call_soon_threadsafe(run_all, callbacks)
        except RuntimeError:  # the loop is gone; nobody is waiting
            pass
