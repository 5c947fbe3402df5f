"""`queueserver redrive`: a message move task followed to its end; Ctrl-C cancels it."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from typing import Any, Callable

from queueserver.admin_cli import client
from queueserver.admin_cli.client import Admin, AdminError
from queueserver.admin_cli.output import Output

_ENDED = {"COMPLETED", "FAILED", "CANCELLED"}


def _arn(admin: Admin, name: str) -> str:
    url = admin.url(name)
    return admin.call("get_queue_attributes", QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


class _CtrlC:
    """A SIGINT handler that only notes the signal (no lock: it runs between any two bytecodes)."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, signum: int, frame: object) -> None:
        self.seen = True


def redrive(admin: Admin, out: Output, args: argparse.Namespace) -> int:
    source_arn = _arn(admin, args.name)
    params: dict[str, Any] = {"SourceArn": source_arn}
    if args.to:
        params["DestinationArn"] = _arn(admin, args.to)
    if args.rate is not None:
        params["MaxNumberOfMessagesPerSecond"] = args.rate
    handle = admin.call("start_message_move_task", **params)["TaskHandle"]
    with _progress(out, args.name) as show:
        # Ctrl-C only sets a flag, seen between polls: an interrupt in the middle of a request could leave
        # the client's connection pool or a lock of botocore's half-held, and the cancel would then hang.
        interrupted = _CtrlC()
        previous = signal.signal(signal.SIGINT, interrupted)
        try:
            task = _follow(admin, source_arn, args.interval, show, interrupted)
        finally:
            signal.signal(signal.SIGINT, previous)  # a second Ctrl-C while cancelling stops at once
        if task is None:
            with contextlib.suppress(AdminError):  # it may have ended meanwhile: the status says
                admin.call("cancel_message_move_task", TaskHandle=handle)
            task = _follow(admin, source_arn, args.interval, show)
            assert task is not None
            return client.INTERRUPTED if task["status"] == "CANCELLED" else _exit_code(task)
    return _exit_code(task)


def _exit_code(task: dict[str, Any]) -> int:
    return client.OK if task["status"] == "COMPLETED" else client.TASK_FAILED


def _follow(admin: Admin, source_arn: str, interval: float, show: Callable[[dict[str, Any]], None],
            interrupted: _CtrlC | None = None) -> dict[str, Any] | None:
    """Poll the source's newest task (ours) until it ends, showing each change; None once `interrupted`."""
    while True:
        results = admin.call("list_message_move_tasks", SourceArn=source_arn, MaxResults=1).get("Results", [])
        if not results:
            raise AdminError("the move task is not listed", client.SQS_ERROR)
        found = results[0]
        task = {"status": found["Status"], "moved": found.get("ApproximateNumberOfMessagesMoved", 0),
                "to_move": found.get("ApproximateNumberOfMessagesToMove"),
                **({"failure_reason": found["FailureReason"]} if found.get("FailureReason") else {})}
        show(task)
        if task["status"] in _ENDED:
            return task
        time.sleep(interval)  # a signal's handler runs, then the sleep goes on (PEP 475): a poll's delay at most
        if interrupted is not None and interrupted.seen:
            return None


@contextlib.contextmanager
def _progress(out: Output, name: str) -> Any:
    """A function that shows a task's state: JSON lines, a live bar on a terminal, else plain lines."""
    last: list[dict[str, Any]] = []

    def changed(task: dict[str, Any]) -> bool:
        if last and last[-1] == task:
            return False
        last[:] = [task]
        return True

    if out.as_json:
        yield lambda task: changed(task) and out.json(task)
    elif sys.stdout.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=out.console) as bar:
            row = bar.add_task(f"redrive {name}", total=None)

            def show(task: dict[str, Any]) -> None:
                bar.update(row, completed=task["moved"], total=task["to_move"],
                           description=f"redrive {name} {task['status']}")

            yield show
    else:
        yield lambda task: changed(task) and out.console.print(
            f"{task['status']} {task['moved']}/{task['to_move'] if task['to_move'] is not None else '?'}"
            + (f" {task['failure_reason']}" if "failure_reason" in task else ""), markup=False)
