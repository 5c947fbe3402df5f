"""Handlers of the dead-letter actions."""

from __future__ import annotations

import json
from typing import Any

from queueserver import errors, limits
from queueserver.protocol import params
from queueserver.protocol.params import RequestContext
from queueserver.protocol.queue_actions import paginate, resolve_queue
from queueserver.storage import QueueEngine


async def list_dead_letter_source_queues(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    dead_letter_queue = resolve_queue(engine, ctx, p)
    max_results = params.integer(p, "MaxResults", None, 1, limits.MAX_LIST_RESULTS,
                                 "MaxResults must be an integer between 1 and 1000.")
    sources = []
    for queue in engine.list_queues(ctx.region, ctx.account):
        try:
            target = json.loads(queue.attributes.get("RedrivePolicy", "") or "{}").get("deadLetterTargetArn")
        except (ValueError, AttributeError):
            target = None
        if target == dead_letter_queue.arn:
            sources.append(queue)
    return paginate([ctx.queue_url(s.name) for s in sources], [s.name for s in sources],
                    max_results, params.string(p, "NextToken"), "queueUrls")


async def not_supported(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    raise errors.UnsupportedOperation("Message move tasks are not supported by this version of queueserver.")
