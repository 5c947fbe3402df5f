"""queueserver's extensions to the SQS API, named so that no one mistakes them for SQS's.

`QueueserverBrowseMessages` lists a queue's messages in send order without receiving
them: no receipt handle is issued, no receive count moves, nothing becomes invisible.
So a dead-letter queue can be read for analysis as often as needed. Over JSON it is
`X-Amz-Target: AmazonSQS.QueueserverBrowseMessages`; over Query, `Action=QueueserverBrowseMessages`.
"""

from __future__ import annotations

from typing import Any

from queueserver import errors
from queueserver.models import BrowsedMessage
from queueserver.protocol import messages, params
from queueserver.protocol.params import RequestContext
from queueserver.protocol.queue_actions import resolve_queue
from queueserver.storage import QueueEngine

BROWSE_ACTION = "QueueserverBrowseMessages"
MAX_BROWSE = 1000
DEFAULT_BROWSE = 100


async def browse_messages(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = resolve_queue(engine, ctx, p)
    limit = params.integer(p, "MaxNumberOfMessages", DEFAULT_BROWSE, 1, MAX_BROWSE,
                           f"Must be between 1 and {MAX_BROWSE}, if provided.")
    token = params.string(p, "NextToken")
    after = 0
    if token:
        if not token.isdigit():
            raise errors.InvalidParameterValue("Invalid NextToken value.")
        after = int(token)
    attribute_names = params.string_list(p, "MessageAttributeNames") if "MessageAttributeNames" in p else ["All"]
    assert limit is not None
    browsed = await engine.browse_messages(queue, after, limit)
    result: dict[str, Any] = {"Messages": [_message(m, attribute_names) for m in browsed]}
    if len(browsed) == limit:
        result["NextToken"] = str(browsed[-1].position)
    return result


def _message(m: BrowsedMessage, attribute_names: list[str]) -> dict[str, Any]:
    system = {
        "SenderId": m.sender_id,
        "SentTimestamp": str(m.sent_at_ms),
        "ApproximateReceiveCount": str(m.receive_count),
        "ApproximateFirstReceiveTimestamp": str(m.first_received_at_ms) if m.first_received_at_ms else None,
        "AWSTraceHeader": m.trace_header,
        "MessageGroupId": m.group_id,
        "MessageDeduplicationId": m.deduplication_id,
        "SequenceNumber": m.sequence_number,
        "DeadLetterQueueSourceArn": m.dead_letter_source_arn,
    }
    result: dict[str, Any] = {
        "MessageId": m.message_id, "MD5OfBody": m.md5_of_body, "Body": m.body, "State": m.state,
        "Attributes": {k: v for k, v in system.items() if v is not None},
    }
    selected = messages.select_attributes(m.attributes, attribute_names)
    if selected:
        result["MD5OfMessageAttributes"] = messages.md5_of_attributes(selected)
        result["MessageAttributes"] = selected
    return result
