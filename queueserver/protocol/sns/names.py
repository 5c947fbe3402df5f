"""SNS's names and ARNs, and reading members, with AWS's error texts."""

from __future__ import annotations

import re
from typing import Any

from queueserver import errors
from queueserver.models import Topic, TopicSubscription
from queueserver.protocol.params import RequestContext
from queueserver.storage import QueueEngine

_TOPIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,256}")  # fullmatch
_QUEUE_ARN = re.compile(r"arn:aws:sqs:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,80}")  # fullmatch
_SUBSCRIPTION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # fullmatch
PAGE = 100  # ListTopics and ListSubscriptions answer at most this many per call


def invalid(what: str) -> errors.InvalidParameter:
    return errors.InvalidParameter(f"Invalid parameter: {what}")


def text(params: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise errors.SNSValidationError(f"1 validation error detected: Value null at '{name[0].lower()}"
                                            f"{name[1:]}' failed to satisfy constraint: Member must not be null")
        return None
    if not isinstance(value, str):
        raise invalid(name)
    return value


def check_topic_name(name: str, fifo: bool) -> None:
    base = name.removesuffix(".fifo") if fifo else name
    if (not _TOPIC_NAME.fullmatch(base) or len(name) > 256 or fifo != name.endswith(".fifo")):
        raise invalid("Topic Name")


def topic_parts(arn: str, member: str) -> tuple[str, str, str]:
    """(region, account, name) of a topic ARN, or AWS's InvalidParameter for a malformed one."""
    parts = arn.split(":")
    if len(parts) < 6:
        raise invalid(f"{member} Reason: An ARN must have at least 6 elements, not {len(parts)}")
    if parts[0] != "arn" or parts[2] != "sns" or len(parts) != 6:
        raise invalid(member)
    return parts[3], parts[4], parts[5]


def find_topic(engine: QueueEngine, ctx: RequestContext, arn: str, member: str = "TopicArn") -> Topic:
    region, account, name = topic_parts(arn, member)
    if region != ctx.region:
        raise invalid(member)
    topic = engine.topics.get(region, account, name)
    if topic is None:
        raise errors.TopicNotFound("Topic does not exist")
    return topic


def topic_of(engine: QueueEngine, ctx: RequestContext, params: dict[str, Any]) -> Topic:
    arn = text(params, "TopicArn", required=True)
    assert arn is not None
    return find_topic(engine, ctx, arn)


def subscription_of(engine: QueueEngine, params: dict[str, Any]) -> TopicSubscription | None:
    """The subscription a SubscriptionArn names; None for a well-formed ARN of none."""
    arn = params.get("SubscriptionArn")
    if not isinstance(arn, str) or not arn:
        raise invalid("SubscriptionArn Reason: no value for required parameter")
    parts = arn.split(":")
    if len(parts) < 6:
        raise invalid(f"SubscriptionArn Reason: An ARN must have at least 6 elements, not {len(parts)}")
    if len(parts) != 7 or not _SUBSCRIPTION_ID.fullmatch(parts[6]):
        raise invalid("SubscriptionId")
    return engine.topics.subscription(arn)


def is_queue_arn(endpoint: str) -> bool:
    return _QUEUE_ARN.fullmatch(endpoint) is not None


def page(items: list[Any], token: Any, key: Any) -> tuple[list[Any], str | None]:
    """A page of at most PAGE items after the one whose key is the token; the next token if more remain."""
    start = 0
    if token not in (None, ""):
        if not isinstance(token, str):
            raise invalid("NextToken")
        keys = [key(item) for item in items]
        start = next((i for i, k in enumerate(keys) if k > token), len(items))
    chosen = items[start:start + PAGE]
    more = start + PAGE < len(items)
    return chosen, (key(chosen[-1]) if more and chosen else None)
