"""Publish and PublishBatch: validated with AWS's texts, then stored in every matching subscribed queue
in the one transaction that answers the publisher (storage/topics.py).

What each subscription's queue receives is decided here (`TopicDeliveries.render`): its filter policy, then
the JSON envelope (signed, envelope.py) or, with RawMessageDelivery, the message itself with its
attributes as SQS message attributes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from queueserver import errors
from queueserver.models import FilteredOut, NewMessage, Publication, Queue, Topic, TopicSubscription, uuid4_string
from queueserver.protocol import messages
from queueserver.protocol.params import RequestContext
from queueserver.protocol.sns import envelope, filter_policy
from queueserver.protocol.sns.names import find_topic, invalid, text
from queueserver.storage import QueueEngine

MAX_SIZE = 262_144
MAX_BATCH = 10
MAX_RAW_ATTRIBUTES = 10  # SQS's limit: a raw delivery with more fails, as AWS's does
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # fullmatch
_BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")  # fullmatch
_DATA_TYPE = re.compile(r"(String|Number|Binary)(\.[^\s]+)?")  # fullmatch; `String.` is refused
_ID = re.compile(r"[\x21-\x7e]{1,128}")  # fullmatch: alphanumerics and punctuation
_random = random.Random()

# The signer of the server's database (made on first use), given to the actions by the SNS dispatcher.
SignerSource = Callable[[], Awaitable[envelope.Signer]]
MayDeliver = Callable[[Queue, Topic], bool]


@dataclass(slots=True)
class Message:
    """A validated publication and what its deliveries share."""

    publication: Publication
    message: str  # what an sqs subscription receives (MessageStructure=json: its "sqs" or "default")
    subject: str | None = None
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)  # SQS's stored shape
    notification: envelope.Notification | None = None  # set once signed


def _attribute_error(text_: str) -> errors.ParameterValueInvalid:
    return errors.ParameterValueInvalid(text_)


def _check_name(name: str) -> None:
    if len(name.encode("utf-8")) >= 256:
        raise _attribute_error("Length of message attribute name must be less than 256 bytes.")
    bad = next((c for c in name if not _ATTRIBUTE_NAME.fullmatch(c)), None)
    if bad is not None:
        raise _attribute_error(f"Invalid non-alphanumeric character '#x{ord(bad):X}' was found in the message "
                               "attribute name. Can only include alphanumeric characters, hyphens, underscores, "
                               "or dots.")
    if name.startswith("."):
        raise _attribute_error("Invalid message attribute name starting with character '.' was found.")
    if name.endswith("."):
        raise _attribute_error("Invalid message attribute name ending with character '.' was found.")
    if ".." in name:
        raise _attribute_error("Message attribute name can not have successive '.' character.")


def _attributes(raw: Any, path: str) -> tuple[dict[str, dict[str, str]], int]:
    """The attributes in SQS's stored shape (Binary as base64) and their size as SNS counts it."""
    if raw in (None, ""):
        return {}, 0
    if not isinstance(raw, dict):
        raise invalid("MessageAttributes")
    kept: dict[str, dict[str, str]] = {}
    size = 0
    for name, value in raw.items():
        value = value if isinstance(value, dict) else {}
        data_type = value.get("DataType")
        if not data_type:
            raise errors.SNSValidationError(f"1 validation error detected: Value null at '{path}.{name}.member"
                                            ".dataType' failed to satisfy constraint: Member must not be null")
        _check_name(name)
        if not _DATA_TYPE.fullmatch(data_type):
            raise _attribute_error(f"The message attribute '{name}' has an invalid message attribute type, the set "
                                   "of supported type prefixes is Binary, Number, and String.")
        kind = data_type.partition(".")[0]
        if kind == "Binary":
            if value.get("BinaryValue") in (None, ""):
                if value.get("StringValue") is not None:
                    raise _attribute_error(f"The message attribute '{name}' with type 'Binary' must use field "
                                           "'Binary'.")
                raise _attribute_error(f"The message attribute '{name}' must contain non-empty message attribute "
                                       "value for message attribute type 'Binary'.")
            try:
                decoded = base64.b64decode(value["BinaryValue"], validate=True)
            except (binascii.Error, ValueError):
                raise _attribute_error(f"The message attribute '{name}' has an invalid binary value.") from None
            kept[name] = {"DataType": data_type, "BinaryValue": base64.b64encode(decoded).decode("ascii")}
            size += len(decoded)
        else:
            string = value.get("StringValue")
            if string in (None, ""):
                if value.get("BinaryValue") is not None:
                    raise _attribute_error(f"The message attribute '{name}' with type '{kind}' must use field "
                                           "'String'.")
                raise _attribute_error(f"The message attribute '{name}' must contain non-empty message attribute "
                                       f"value for message attribute type '{kind}'.")
            if kind == "Number":
                _check_number(name, string)
            kept[name] = {"DataType": data_type, "StringValue": string}
            size += len(string.encode("utf-8"))
        size += len(name.encode("utf-8")) + len(data_type.encode("utf-8"))
    return kept, size


def _check_number(name: str, value: str) -> None:
    try:
        float(value)
    except ValueError:
        raise _attribute_error(f"An error occurred while trying to parse the value '{value}' of the message "
                               f"attribute '{name}' of type 'Number'.") from None


def _structured(message: str) -> str:
    """MessageStructure=json: the string an sqs subscription receives."""
    try:
        document = filter_policy.parse_json(message)
    except ValueError:
        raise invalid("Message Structure - JSON message body failed to parse") from None
    if not isinstance(document, dict) or not isinstance(document.get("default"), str):
        raise invalid("Message Structure - No default entry in JSON message body")
    sqs = document.get("sqs")
    return sqs if isinstance(sqs, str) else document["default"]


def _check_subject(subject: Any) -> str | None:
    if subject is None:
        return None
    if (not isinstance(subject, str) or not subject or len(subject) >= 100
            or any(ord(c) < 32 or ord(c) == 127 for c in subject)):
        raise invalid("Subject")
    return subject


def validated(topic: Topic, entry: dict[str, Any], path: str) -> Message:
    """One message to publish (Publish's members or a batch entry), or the error AWS answers."""
    body = entry.get("Message")
    if not isinstance(body, str) or body == "":
        raise invalid("Empty message")
    if messages.first_invalid_character(body) is not None:
        raise invalid("Message Reason: the message contains characters outside the allowed set")
    subject = _check_subject(entry.get("Subject"))
    structure = entry.get("MessageStructure")
    if structure not in (None, "", "json"):
        raise invalid("MessageStructure")
    delivered = _structured(body) if structure == "json" else body
    attributes, size = _attributes(entry.get("MessageAttributes"), path)
    size += len(body.encode("utf-8"))
    if size > MAX_SIZE:
        raise invalid("Message too long")
    group = entry.get("MessageGroupId")
    dedup = entry.get("MessageDeduplicationId")
    for name, value in (("MessageGroupId", group), ("MessageDeduplicationId", dedup)):
        if value is not None and (not isinstance(value, str) or not _ID.fullmatch(value)):
            raise invalid(f"{name} Reason: {name} can only include alphanumeric and punctuation characters. "
                          "1 to 128 in length.")
    if topic.fifo:
        if group is None:
            raise invalid("The MessageGroupId parameter is required for FIFO topics")
        if dedup is None:
            if topic.attributes.get("ContentBasedDeduplication") != "true":
                raise invalid("The topic should either have ContentBasedDeduplication enabled or "
                              "MessageDeduplicationId provided explicitly")
            dedup = hashlib.sha256(body.encode("utf-8")).hexdigest()
    elif dedup is not None:
        raise invalid("MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that "
                      "is not valid for this topic type")
    publication = Publication(uuid4_string(_random), group, dedup, size)
    return Message(publication, delivered, subject, attributes)


def _envelope_attributes(attributes: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {name: {"Type": a["DataType"], "Value": a.get("StringValue", a.get("BinaryValue", ""))}
            for name, a in attributes.items()}


def _sqs_message(body: str, attributes: dict[str, dict[str, str]] | None, group: str | None,
                 dedup: str | None) -> NewMessage:
    size = len(body.encode("utf-8"))
    md5_of_attributes = None
    if attributes:
        md5_of_attributes = messages.md5_of_attributes(attributes)
        size += sum(len(n.encode("utf-8")) + len(a.get("StringValue", a.get("BinaryValue", "")).encode("utf-8"))
                    for n, a in attributes.items())
    return NewMessage(body, messages.md5_of_body(body), 0, attributes or None, md5_of_attributes,
                      group_id=group, deduplication_id=dedup, size=size)


class TopicDeliveries:
    """What each subscription's queue receives of the messages of one request (storage calls `render`)."""

    def __init__(self, topic: Topic, by_id: dict[str, Message], base_url: str) -> None:
        self._topic = topic
        self._by_id = by_id
        self._base_url = base_url
        self._policies: dict[str, Any] = {}  # each filter policy parsed once per request

    def render(self, publication: Publication, subscription: TopicSubscription,
               sequence_number: str | None) -> NewMessage | FilteredOut | str:
        m = self._by_id[publication.message_id]
        attributes = subscription.attributes
        policy = attributes.get("FilterPolicy")
        if policy:
            document = self._policies.get(policy)
            if document is None:
                document = self._policies[policy] = json.loads(policy)
            refusal = (filter_policy.refusal_of_body(document, m.message)
                       if attributes.get("FilterPolicyScope") == "MessageBody"
                       else filter_policy.refusal_of_attributes(document, m.attributes))
            if refusal is not None:
                return FilteredOut(refusal)
        to_fifo = subscription.endpoint.endswith(".fifo")
        group = publication.group_id if (to_fifo or not self._topic.fifo) else None
        dedup = publication.deduplication_id if to_fifo else None
        if attributes.get("RawMessageDelivery") == "true":
            if len(m.attributes) > MAX_RAW_ATTRIBUTES:  # SQS takes no more: undeliverable, as on AWS
                return "more message attributes than an SQS message takes"
            return _sqs_message(m.message, m.attributes, group, dedup)
        assert m.notification is not None
        body = m.notification.body(envelope.unsubscribe_url(self._base_url, subscription.arn), sequence_number)
        return _sqs_message(body, None, group, dedup)


async def _publish(engine: QueueEngine, ctx: RequestContext, topic: Topic, batch: list[Message],
                   signer: envelope.Signer | None, may_deliver: MayDeliver) -> list[Any]:
    now = engine.clock.now_ms()
    version = None if topic.fifo else topic.attributes.get("SignatureVersion", "1")
    notifications = []
    for m in batch:
        m.notification = notification = envelope.notification(
            signer, ctx.base_url, message_id=m.publication.message_id, topic_arn=topic.arn, subject=m.subject,
            message=m.message, now_ms=now, signature_version=version,
            attributes=_envelope_attributes(m.attributes) or None)
        notifications.append(notification)
    if any(s.attributes.get("RawMessageDelivery") != "true" for s in engine.topics.subscriptions(topic)):
        for notification in notifications:  # here, not on the database thread where a delivery would sign it
            notification.sign()
    delivery = TopicDeliveries(topic, {m.publication.message_id: m for m in batch}, ctx.base_url)
    return await engine.topics.publish(topic, [m.publication for m in batch], delivery.render, may_deliver,
                                       sender_id=ctx.sender_id)


def _target(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> Topic:
    if p.get("PhoneNumber") not in (None, ""):
        raise invalid("PhoneNumber Reason: this server delivers to sqs subscriptions only")
    arn = p.get("TopicArn") or p.get("TargetArn")
    if not isinstance(arn, str) or not arn:
        raise invalid("TopicArn or TargetArn Reason: no value for required parameter")
    member = "TopicArn" if p.get("TopicArn") else "TargetArn"
    if member == "TargetArn" and ":sns:" not in arn:
        raise invalid("TargetArn Reason: No endpoint found for the target arn specified")
    return find_topic(engine, ctx, arn, member)


async def publish(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], signer: SignerSource,
                  may_deliver: MayDeliver) -> dict[str, Any]:
    topic = _target(engine, ctx, p)
    message = validated(topic, p, "messageAttributes")
    [answer] = await _publish(engine, ctx, topic, [message], None if topic.fifo else await signer(), may_deliver)
    return {"MessageId": answer.message_id, "SequenceNumber": answer.sequence_number}


def _check_batch(entries: Any) -> list[dict[str, Any]]:
    if entries in (None, "", []):
        raise errors.TopicBatchEmpty()
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise invalid("PublishBatchRequestEntries")
    if len(entries) > MAX_BATCH:
        raise errors.TopicBatchTooManyEntries()
    ids = [e.get("Id") for e in entries]
    for entry_id in ids:
        if not isinstance(entry_id, str) or len(entry_id) > 80:
            raise errors.TopicBatchEntryIdInvalid(
                f"The Id of a batch entry in the batch request is too long: {entry_id}")
        if not _BATCH_ID.fullmatch(entry_id):
            raise errors.TopicBatchEntryIdInvalid(
                f"The Id of a batch entry in the batch request contains an impermissible character: {entry_id}")
    if len(set(ids)) != len(ids):
        raise errors.TopicBatchIdsNotDistinct()
    return entries


async def publish_batch(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], signer: SignerSource,
                        may_deliver: MayDeliver) -> dict[str, Any]:
    """Every entry is checked first: a fault in any fails the whole request, as AWS's does; the entries
    are then stored together, in one transaction."""
    topic = _target(engine, ctx, {"TopicArn": text(p, "TopicArn", required=True)})
    entries = _check_batch(p.get("PublishBatchRequestEntries"))
    batch = [validated(topic, entry, f"publishBatchRequestEntries.{i}.member.messageAttributes")
             for i, entry in enumerate(entries, 1)]
    if sum(m.publication.size for m in batch) > MAX_SIZE:
        raise errors.TopicBatchTooLong()
    answers = await _publish(engine, ctx, topic, batch, None if topic.fifo else await signer(), may_deliver)
    return {"Successful": [{"Id": entry["Id"], "MessageId": a.message_id, "SequenceNumber": a.sequence_number}
                           for entry, a in zip(entries, answers)], "Failed": []}
