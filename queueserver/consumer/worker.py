"""`Worker`: receive from one queue, run handlers concurrently, keep long work invisible,
delete what succeeded, apply a failure policy to what failed, and stop without stranding a message.

Design. One asyncio event loop owns every piece of worker state (tracked messages,
units of work), so nothing in it needs a lock and the order of events is the order
of callbacks. boto3 is synchronous, so each SQS call runs in a small pool of I/O
threads and is awaited from the loop; a long poll therefore blocks one I/O thread,
never the heartbeat, the deletes or the handlers. Sync handlers run in their own
pool of `max_concurrency` threads; async handlers run as tasks on the loop itself.
Why not plain threads: async handlers need a loop anyway, the heartbeat needs timers
that a test can drive from an injected clock (the `queueserver.clock.Clock` protocol
schedules on the loop), and with one owner the delicate orderings (processing.py)
are easy to see and keep.

Shutdown (stop(), SIGTERM or SIGINT): stop receiving; release at once every message
received but not started (visibility 0); let running handlers finish for up to
`shutdown_grace_period` (a second SIGINT cuts it short); then cancel async handlers
and abandon sync ones, releasing their messages too. A ReceiveMessage already in
flight cannot be cancelled through boto3, so the shutdown waits for it (at most
`wait_time_seconds`) and releases what it returns (that receive still counts toward
their ApproximateReceiveCount): no message is left invisible for a whole visibility
timeout because the worker stopped.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from typing import Any

from queueserver.consumer.heartbeat import Heartbeat
from queueserver.consumer.hooks import Reporter, WorkerCounters, WorkerHooks
from queueserver.consumer.policies import FailurePolicy, LeaveToExpire
from queueserver.consumer.processing import Handler, Processor
from queueserver.consumer.settings import DERIVED, Derived, WorkerSettings
from queueserver.consumer.threads import DaemonThreadPool
from queueserver.consumer.timing import Clock, MonotonicClock

log = logging.getLogger(__name__)

IO_THREADS = 6  # a long poll, deletes, releases and heartbeat batches at once; under boto3's 10 connections


class Worker:
    """Consumes `queue_url` with `handler(message)`, where message is the dict boto3's
    receive_message returns (Body, MessageId, ReceiptHandle, Attributes, MessageAttributes…).

    A handler succeeds by returning (the message is deleted, in DeleteMessageBatch calls)
    and fails by raising or returning `Outcome.FAILED` (the failure policy applies).
    Sync handlers run in threads, async handlers (coroutine functions) on the event loop.

    Options:
      max_concurrency: handlers running at once (on a FIFO queue: message groups, each run in order).
      visibility_timeout: seconds; used by every receive and every extension.
      extension_threshold: seconds; the heartbeat extends a message with less than this left
        (default: min(5, visibility_timeout / 2), so the defaults fit any visibility timeout).
      heartbeat_interval: seconds between heartbeat rounds (default: min(1, extension_threshold / 2));
        0 or None turns the heartbeat off.
      wait_time_seconds: long polling, 0..20.
      max_messages: per receive, 1..10.
      prefetch: messages (FIFO: groups) held beyond max_concurrency, waiting for a free slot (default 0).
      failure_policy: LeaveToExpire() (default), MakeVisibleNow() or ExponentialBackoff(...).
      hooks: a WorkerHooks subclass for logging and metrics.
      shutdown_grace_period: seconds running handlers get to finish after a stop.
      fifo: None detects it from the ".fifo" suffix of the queue URL.
      clock: the worker's own timing (heartbeat, remaining visibility, grace); monotonic by default.
      message_attribute_names, system_attribute_names: what each receive asks for (all by default).
    """

    def __init__(self, client: Any, queue_url: str, handler: Handler, *, max_concurrency: int = 10,
                 visibility_timeout: int = 30, extension_threshold: float | None = None,
                 heartbeat_interval: float | None | Derived = DERIVED, wait_time_seconds: int = 20,
                 max_messages: int = 10,
                 prefetch: int = 0, failure_policy: FailurePolicy | None = None, hooks: WorkerHooks | None = None,
                 shutdown_grace_period: float = 25.0, fifo: bool | None = None, clock: Clock | None = None,
                 message_attribute_names: tuple[str, ...] = ("All",),
                 system_attribute_names: tuple[str, ...] = ("All",)) -> None:
        if not callable(handler):
            raise TypeError("handler must be callable")
        self.settings = WorkerSettings(
            queue_url=queue_url, max_concurrency=max_concurrency, visibility_timeout=visibility_timeout,
            extension_threshold=extension_threshold, heartbeat_interval=heartbeat_interval,
            wait_time_seconds=wait_time_seconds, max_messages=max_messages, prefetch=prefetch,
            failure_policy=failure_policy or LeaveToExpire(), shutdown_grace_period=shutdown_grace_period,
            fifo=fifo, message_attribute_names=tuple(message_attribute_names),
            system_attribute_names=tuple(system_attribute_names))
        self._client = client
        self._handler = handler
        self._clock: Clock = clock or MonotonicClock()
        self._reporter = Reporter(hooks)
        # Shared with other threads (stop(), join()): guarded by _lock.
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = False
        self._thread: threading.Thread | None = None
        self._thread_error: BaseException | None = None
        self._processor: Processor | None = None
        self._grace_cut: asyncio.Event | None = None

    @property
    def counters(self) -> WorkerCounters:
        """What the worker has done so far; safe to read from any thread."""
        return self._reporter.snapshot()

    # -- running -----------------------------------------------------------------------

    def run(self, handle_signals: bool = True) -> None:
        """Run until stopped, on a new event loop in this thread.

        With `handle_signals` (on the main thread) SIGTERM and SIGINT begin a graceful
        shutdown; a second SIGINT cuts the grace period short.
        """
        loop = asyncio.new_event_loop()
        installed: list[signal.Signals] = []
        try:
            if handle_signals and threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.add_signal_handler(sig, self._on_signal, sig)
                    installed.append(sig)
            loop.run_until_complete(self.run_async())
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def start(self) -> Worker:
        """Run in a background thread; returns at once. Pair with stop() and join()."""
        with self._lock:
            if self._thread is not None or self._loop is not None:
                raise RuntimeError("a Worker runs once")
            self._thread = threading.Thread(target=self._thread_main, name="queueserver-worker")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Begin a graceful shutdown; returns at once. Safe from any thread, and idempotent."""
        with self._lock:
            self._stop_requested = True
            loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._begin_stop)
            except RuntimeError:  # the loop already closed: the worker has stopped
                pass

    def join(self, timeout: float | None = None) -> bool:
        """Wait for a start()ed worker to finish; False if it is still running after `timeout`."""
        if self._thread is None:
            raise RuntimeError("join() needs a worker started with start()")
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        if self._thread_error is not None:
            raise RuntimeError("the worker crashed") from self._thread_error
        return True

    def __enter__(self) -> Worker:  # noqa: PYI034 - a Worker is not meant to be subclassed for this
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        self.join()

    async def run_async(self) -> None:
        """Run until stopped, on the running event loop."""
        s = self.settings
        io_pool = DaemonThreadPool(IO_THREADS, "queueserver-worker-sqs")
        handler_pool = DaemonThreadPool(s.max_concurrency, "queueserver-worker-handler")
        processor = Processor(s, self._client, self._handler, self._clock, self._reporter, io_pool, handler_pool)
        grace_cut = asyncio.Event()
        with self._lock:
            if self._loop is not None:
                raise RuntimeError("a Worker runs once")
            self._loop = asyncio.get_running_loop()
            self._processor, self._grace_cut = processor, grace_cut
            stop_early = self._stop_requested
        heartbeat = Heartbeat(
            clock=self._clock, interval_s=s.heartbeat_interval or 0.0, threshold_s=s.extension_threshold,
            visibility_timeout=s.visibility_timeout, tracked=processor.tracked, io=io_pool.run,
            client=self._client, queue_url=s.queue_url, reporter=self._reporter) if s.heartbeat_on else None
        heartbeat_task = asyncio.ensure_future(heartbeat.run()) if heartbeat else None
        receiver = asyncio.ensure_future(processor.receive_loop())
        log.info("worker consuming %s (%s queue, concurrency %d, visibility %d s, heartbeat %s)",
                 s.queue_url, "FIFO" if s.is_fifo else "standard", s.max_concurrency, s.visibility_timeout,
                 f"every {s.heartbeat_interval:g} s" if heartbeat else "off")
        if stop_early:
            self._begin_stop()
        abandoned = False
        try:
            stopped = asyncio.ensure_future(processor.stopping.wait())
            await asyncio.wait({stopped, receiver}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            await asyncio.gather(stopped, return_exceptions=True)
            if not processor.stopping.is_set():  # the receive loop died of a bug: stop cleanly anyway
                log.error("the receive loop ended unexpectedly; stopping the worker")
                self._begin_stop()
            processor.release_not_started()
            abandoned = await processor.finish_running(round(s.shutdown_grace_period * 1000), grace_cut)
            await asyncio.wait({receiver})  # a receive in flight returns; the loop releases what it got
            processor.release_not_started()
            if heartbeat is not None and heartbeat_task is not None:
                heartbeat.stop()  # after the round in progress, whose extensions releases wait for
                await heartbeat_task
                await asyncio.sleep(0)  # let releases queued behind those extensions reach their batch
            await processor.drain()
            receiver.result()
        finally:
            for task in (heartbeat_task, receiver):
                if task is not None and not task.done():
                    task.cancel()
            await asyncio.gather(*(t for t in (heartbeat_task, receiver) if t is not None), return_exceptions=True)
            io_pool.shutdown(join_timeout=5.0)
            handler_pool.shutdown(join_timeout=0.0 if abandoned else 5.0)
            log.info("worker stopped: %s", self.counters)

    # -- signals and stopping ------------------------------------------------------

    def _thread_main(self) -> None:
        try:
            self.run(handle_signals=False)
        except BaseException as exc:  # reported by join()
            log.exception("the worker crashed")
            self._thread_error = exc

    def _on_signal(self, sig: signal.Signals) -> None:
        # Only a second SIGINT (Ctrl+C again, by a person) cuts the grace period: SIGTERM
        # comes from process managers, which may deliver it to the process and to its group.
        processor, grace_cut = self._processor, self._grace_cut
        stopping = processor is not None and processor.stopping.is_set()
        if stopping and sig is signal.SIGINT and grace_cut is not None:
            log.warning("SIGINT again: cutting the shutdown grace period short")
            grace_cut.set()
        elif not stopping:
            log.info("%s: shutting down gracefully", sig.name)
            self.stop()

    def _begin_stop(self) -> None:
        processor = self._processor
        if processor is not None and not processor.stopping.is_set():
            log.info("worker stopping: no more receives; releasing messages not started")
            processor.begin_stop()
