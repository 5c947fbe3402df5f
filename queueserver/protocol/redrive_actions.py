"""Handlers of the dead-letter actions: source queues and message move tasks."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from queueserver import errors, limits
from queueserver.client_text import json_document
from queueserver.models import Queue, parse_arn
from queueserver.protocol import params
from queueserver.protocol.params import RequestContext
from queueserver.protocol.queue_actions import governing_policy, paginate, resolve_queue
from queueserver.storage import QueueEngine

MAX_MOVE_RATE = 500
MAX_MOVE_TASKS_LISTED = 10


def _sources_of(engine: QueueEngine, ctx: RequestContext, dead_letter_queue: Queue) -> list[Queue]:
    sources, _ = engine.dead_letter_sources(dead_letter_queue)
    return [q for q in sources if q.subscribed_to is None
            and q.region == dead_letter_queue.region and q.account == dead_letter_queue.account]


async def list_dead_letter_source_queues(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    dead_letter_queue = resolve_queue(engine, ctx, p)
    max_results = params.integer(p, "MaxResults", None, 1, limits.MAX_LIST_RESULTS,
                                 "MaxResults must be an integer between 1 and 1000.")
    sources = _sources_of(engine, ctx, dead_letter_queue)
    return paginate([ctx.queue_url(s.name, s.account) for s in sources], [s.name for s in sources],
                    max_results, params.string(p, "NextToken"), "queueUrls")


def _queue_by_arn(engine: QueueEngine, ctx: RequestContext, arn: str, parameter: str,
                  action: str | None = None) -> Queue:
    queue = engine.find_queue_by_arn(arn)
    if queue is None or queue.account != ctx.account or queue.region != ctx.region:
        ctx.authorize(arn, arn.split(":")[4] if arn.count(":") >= 5 else None, None, action)
        raise errors.ResourceNotFound(f"The resource that you specified for the {parameter} parameter doesn't exist.")
    ctx.authorize(queue.arn, queue.account, governing_policy(engine, queue, *queue.key), action)
    return queue


async def start_message_move_task(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    source_arn = params.string(p, "SourceArn", required_=True)
    destination_arn = params.string(p, "DestinationArn")
    rate = params.integer(p, "MaxNumberOfMessagesPerSecond", None, 1, MAX_MOVE_RATE,
                          f"MaxNumberOfMessagesPerSecond must be between 1 and {MAX_MOVE_RATE}.")
    assert source_arn is not None
    source = _queue_by_arn(engine, ctx, source_arn, "SourceArn")
    if not _sources_of(engine, ctx, source):
        raise errors.InvalidParameterValue("Source queue must be configured as a Dead Letter Queue.")
    authorize_origins = None
    if destination_arn:
        destination = _queue_by_arn(engine, ctx, destination_arn, "DestinationArn", "SendMessage")
        if destination.fifo != source.fifo:
            raise errors.InvalidParameterValue("The source and destination queues must be of the same type.")
        if destination.id == source.id:
            raise errors.InvalidParameterValue("The source and destination queues must be different.")
    elif ctx.caller is not None:
        # Each message goes back where it came from: the caller must be allowed to send to every such queue,
        # those (and the subscriptions) that may dead-letter here later and those the messages came from.
        for queue in engine.dead_letter_sources(source)[0]:
            _may_send_back(engine, ctx, queue.arn)

        def authorize_origins(origins: list[str]) -> None:
            for origin in origins:
                _may_send_back(engine, ctx, origin)

    handle = await engine.start_move_task(source, destination_arn=destination_arn or None, rate=rate,
                                          authorize_origins=authorize_origins)
    return {"TaskHandle": handle}


def _may_send_back(engine: QueueEngine, ctx: RequestContext, arn: str) -> None:
    """AccessDenied unless the caller may send to the queue a dead-lettered message came from."""
    named = parse_arn(arn)
    if named is None:  # the task fails on such a message: there is nowhere to send it
        return
    ctx.authorize(arn, named[1], governing_policy(engine, engine.find_queue_by_arn(arn), *named), "SendMessage")


async def list_message_move_tasks(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    source_arn = params.string(p, "SourceArn", required_=True)
    max_results = params.integer(p, "MaxResults", 1, 1, MAX_MOVE_TASKS_LISTED,
                                 f"MaxResults must be between 1 and {MAX_MOVE_TASKS_LISTED}.")
    assert source_arn is not None and max_results is not None
    source = _queue_by_arn(engine, ctx, source_arn, "SourceArn")
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
    handle = params.string(p, "TaskHandle", required_=True)
    assert handle is not None
    _queue_by_arn(engine, ctx, _source_arn_of(handle), "SourceArn")
    return {"ApproximateNumberOfMessagesMoved": await engine.cancel_move_task(handle)}


def _source_arn_of(handle: str) -> str:
    """The source queue ARN a task handle names (base64 of JSON with taskId and sourceArn)."""
    try:
        named = json_document(base64.b64decode(handle, validate=True))
    except (binascii.Error, ValueError):  # ValueError: not ASCII, so not base64
        named = None
    if not isinstance(named, dict) or not isinstance(named.get("taskId"), str) \
            or not isinstance(named.get("sourceArn"), str):
        raise errors.InvalidParameterValue("Value for parameter TaskHandle is invalid.")
    return named["sourceArn"]
