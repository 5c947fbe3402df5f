"""RedrivePolicy and RedriveAllowPolicy: parsed, checked against the queues, normalised."""

from __future__ import annotations

import json
from typing import Any

from queueserver import errors
from queueserver.client_text import json_document, whole_number
from queueserver.models import Queue, parse_arn
from queueserver.protocol.params import RequestContext
from queueserver.storage import QueueEngine

MAX_RECEIVE_COUNT = 1000
MAX_SOURCE_QUEUE_ARNS = 10


def _invalid(name: str, value: str, reason: str) -> errors.InvalidAttributeValue:
    return errors.InvalidAttributeValue(f"Value {value} for parameter {name} is invalid. Reason: {reason}")


def _object(name: str, value: str) -> dict[str, Any]:
    parsed = json_document(value)
    if not isinstance(parsed, dict):
        raise _invalid(name, value, f"{name} is not a valid JSON object.")
    return parsed


def check_redrive_policy(engine: QueueEngine, ctx: RequestContext, source_name: str, source_fifo: bool,
                         value: str) -> str:
    """The normalised RedrivePolicy, after SQS's checks of its dead-letter target."""
    if value == "":
        return value
    policy = _object("RedrivePolicy", value)
    target_arn = policy.get("deadLetterTargetArn")
    if not isinstance(target_arn, str) or not target_arn:
        raise _invalid("RedrivePolicy", value, "Redrive policy does not contain mandatory attribute: deadLetterTargetArn.")
    if "maxReceiveCount" not in policy:
        raise _invalid("RedrivePolicy", value, "Redrive policy does not contain mandatory attribute: maxReceiveCount.")
    raw_count = policy["maxReceiveCount"]
    count: int | None = 0
    if isinstance(raw_count, int) and not isinstance(raw_count, bool):
        count = raw_count
    elif isinstance(raw_count, str):
        count = whole_number(raw_count.strip())
    if count is None or not 1 <= count <= MAX_RECEIVE_COUNT:
        raise _invalid("RedrivePolicy", value,
                       f"Invalid value for maxReceiveCount: {raw_count}, valid values are from 1 to {MAX_RECEIVE_COUNT} both inclusive.")
    unknown = set(policy) - {"deadLetterTargetArn", "maxReceiveCount"}
    if unknown:
        raise _invalid("RedrivePolicy", value, f"Unknown redrive policy attribute: {sorted(unknown)[0]}.")
    location = parse_arn(target_arn)
    target = engine.find_queue_by_arn(target_arn)
    if location is None or location[:2] != (ctx.region, ctx.account) or target is None:
        raise _invalid("RedrivePolicy", value, "Dead letter target does not exist.")
    source_arn = f"arn:aws:sqs:{ctx.region}:{ctx.account}:{source_name}"
    if target_arn == source_arn:
        # AWS's answer is not recorded. A queue cannot be its own dead-letter queue (a message past
        # maxReceiveCount would be moved to where it is): refused as SQS refuses every other RedrivePolicy
        # it cannot use, with the modeled InvalidAttributeValue (docs: Differences from AWS).
        raise _invalid("RedrivePolicy", value, "A queue cannot be its own dead-letter queue.")
    if target.fifo != source_fifo:
        raise _invalid("RedrivePolicy", value, "Dead-letter queue must be same type of queue as the source.")
    if not allows_source(target, source_arn):
        raise _invalid("RedrivePolicy", value,
                       f"Queue {target_arn} does not allow {source_arn} to use it as a dead-letter queue.")
    return json.dumps({"deadLetterTargetArn": target_arn, "maxReceiveCount": count}, separators=(",", ":"))


def allows_source(dead_letter_queue: Queue, source_arn: str) -> bool:
    text = dead_letter_queue.attributes.get("RedriveAllowPolicy")
    if not text:
        return True
    policy = json.loads(text)
    permission = policy.get("redrivePermission")
    if permission == "denyAll":
        return False
    if permission == "byQueue":
        return source_arn in policy.get("sourceQueueArns", [])
    return True


def check_redrive_allow_policy(value: str) -> str:
    if value == "":
        return value
    policy = _object("RedriveAllowPolicy", value)
    permission = policy.get("redrivePermission")
    if permission not in ("allowAll", "denyAll", "byQueue"):
        raise _invalid("RedriveAllowPolicy", value,
                       "redrivePermission must be one of allowAll, denyAll or byQueue.")
    sources = policy.get("sourceQueueArns")
    if permission == "byQueue":
        if (not isinstance(sources, list) or not sources or len(sources) > MAX_SOURCE_QUEUE_ARNS
                or not all(isinstance(a, str) and parse_arn(a) for a in sources)):
            raise _invalid("RedriveAllowPolicy", value,
                           f"byQueue needs sourceQueueArns: 1 to {MAX_SOURCE_QUEUE_ARNS} queue ARNs.")
        return json.dumps({"redrivePermission": permission, "sourceQueueArns": sources}, separators=(",", ":"))
    if sources is not None:
        raise _invalid("RedriveAllowPolicy", value, "sourceQueueArns is only allowed with redrivePermission byQueue.")
    if set(policy) - {"redrivePermission", "sourceQueueArns"}:
        raise _invalid("RedriveAllowPolicy", value, "Unknown redrive allow policy attribute.")
    return json.dumps({"redrivePermission": permission}, separators=(",", ":"))
