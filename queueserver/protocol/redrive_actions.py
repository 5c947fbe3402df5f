"""Handlers of the dead-letter actions: source queues and message move tasks."""

from __future__ import annotations

from typing import Any

from queueserver import errors, limits
from queueserver.models import Queue
from queueserver.protocol import params
from queueserver.protocol.params import RequestContext
from queueserver.protocol.queue_actions import paginate
from queueserver.storage import QueueEngine

MAX_MOVE_RATE = 500
MAX_MOVE_TASKS_LISTED = 10


def _sources_of(engine: QueueEngine, ctx: RequestContext, dead_letter_queue: Queue) -> list[Queue]:
    sources, _ = engine.dead_letter_sources(dead_letter_queue)
    return [q for q in sources if q.subscribed_to is None
            and q.region == dead_letter_queue.region and q.account == dead_letter_queue.account]


async def list_dead_letter_source_queues(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    dead_letter_queue = ctx.target
    max_results = params.integer(p, "MaxResults", None, 1, limits.MAX_LIST_RESULTS,
                                 "MaxResults must be an integer between 1 and 1000.")
    sources = _sources_of(engine, ctx, dead_letter_queue)
    return paginate([ctx.queue_url(s.name, s.account) for s in sources], [s.name for s in sources],
                    max_results, params.string(p, "NextToken"), "queueUrls")


def move_rate(p: dict[str, Any]) -> int | None:
    """StartMessageMoveTask's MaxNumberOfMessagesPerSecond (checked before its queues are looked up)."""
    return params.integer(p, "MaxNumberOfMessagesPerSecond", None, 1, MAX_MOVE_RATE,
                          f"MaxNumberOfMessagesPerSecond must be between 1 and {MAX_MOVE_RATE}.")


def tasks_listed(p: dict[str, Any]) -> int:
    """ListMessageMoveTasks' MaxResults (checked before its queue is looked up)."""
    return params.integer(p, "MaxResults", 1, 1, MAX_MOVE_TASKS_LISTED,
                          f"MaxResults must be between 1 and {MAX_MOVE_TASKS_LISTED}.") or 1


async def start_message_move_task(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    """Move a dead-letter queue's messages to DestinationArn, or each back to the queue it came from.

    The door authorized the source (StartMessageMoveTask and what moving its messages reads: ReceiveMessage,
    DeleteMessage, GetQueueAttributes) and SendMessage on each destination; `ctx.return_check` asks it of
    the queues the messages came from as the task starts.
    """
    rate = move_rate(p)
    source, destination = ctx.queue, ctx.destination
    if source is None:
        raise errors.InternalError()
    if not _sources_of(engine, ctx, source):
        raise errors.InvalidParameterValue("Source queue must be configured as a Dead Letter Queue.")
    if destination is not None:
        if destination.fifo != source.fifo:
            raise errors.InvalidParameterValue("The source and destination queues must be of the same type.")
        if destination.id == source.id:
            raise errors.InvalidParameterValue("The source and destination queues must be different.")
    handle = await engine.start_move_task(source, destination_arn=destination.arn if destination else None,
                                          rate=rate, authorize_origins=ctx.return_check)
    return {"TaskHandle": handle}


async def list_message_move_tasks(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    max_results = tasks_listed(p)
    source = ctx.queue
    if source is None:
        raise errors.InternalError()
    results = []
    for task in await engine.list_move_tasks(source, max_results=max_results):
        result: dict[str, Any] = {
            "Status": task.status,
            "SourceArn": task.source_arn,
            "ApproximateNumberOfMessagesMoved": task.moved,
            "ApproximateNumberOfMessagesToMove": task.to_move,
            "StartedTimestamp": task.started_at_ms,
        }
        if task.status == "RUNNING":
            result["TaskHandle"] = task.handle
        if task.destination_arn:
            result["DestinationArn"] = task.destination_arn
        if task.rate is not None:
            result["MaxNumberOfMessagesPerSecond"] = task.rate
        if task.failure_reason:
            result["FailureReason"] = task.failure_reason
        results.append(result)
    return {"Results": results}


async def cancel_message_move_task(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    handle = params.string(p, "TaskHandle", required_=True)  # the door authorized the source it names
    assert handle is not None
    return {"ApproximateNumberOfMessagesMoved": await engine.cancel_move_task(handle)}
