"""Handlers of the message actions: send, receive, delete, change visibility, and their batches."""

from __future__ import annotations

import hashlib
import re
from typing import AbstractSet, Any, Callable, TypeVar

from queueserver import errors, limits
from queueserver import extensions as ext
from queueserver.client_connection import ClientConnection
from queueserver.models import DONE, EntryOutcome, NewMessage, Queue, ReceivedMessage, VisibilityChange
from queueserver.protocol import messages, params
from queueserver.protocol.error_codes import wire_error
from queueserver.protocol.params import RequestContext
from queueserver.storage import QueueEngine

_BATCH_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{limits.MAX_BATCH_ENTRY_ID_LENGTH}}}")  # fullmatch: "$" lets "\n" by
_BATCH_IDS = re.compile(rf"{_BATCH_ID.pattern}(?:,{_BATCH_ID.pattern})*")  # a batch's ids joined by ",", fullmatch
_PRINTABLE_ID = re.compile(r"[!-~]{1,128}")
_BODY_ALONE = frozenset({"MessageBody", "Id", "QueueUrl"})  # a batch entry's or a SendMessage's keys
_DELAY_REASON = "DelaySeconds must be >= 0 and <= 900."
_NO_DEDUPLICATION_ID = ("The queue should either have ContentBasedDeduplication enabled or "
                        "MessageDeduplicationId provided explicitly")
_NO_NAMES: frozenset[str] = frozenset()
_VISIBILITY_REASON = f"VisibilityTimeout must be an integer between 0 and {limits.MAX_VISIBILITY_TIMEOUT_SECONDS}."
T = TypeVar("T")


# -- send ------------------------------------------------------------------------

def _new_message(queue: Queue, entry: dict[str, Any]) -> tuple[NewMessage, int]:
    """Validate one message to send; returns it and its size in bytes."""
    body = entry.get("MessageBody")
    size = messages.check_body(body)
    if entry.keys() <= _BODY_ALONE and not queue.fifo:  # nothing optional to look at
        _check_size(queue, size)
        return NewMessage(body, messages.md5_of_body(body), queue.delay_seconds, size=size), size
    # Otherwise each optional part is looked at only when present.
    delay = queue.delay_seconds if entry.get("DelaySeconds") is None else params.integer(
        entry, "DelaySeconds", queue.delay_seconds, 0, limits.MAX_DELAY_SECONDS, _DELAY_REASON)
    raw_attributes = entry.get("MessageAttributes") or None
    if raw_attributes is not None:
        size += messages.check_message_attributes(raw_attributes)
    raw_system = entry.get("MessageSystemAttributes") or None
    if raw_system is not None:
        messages.check_message_attributes(raw_system, system=True)
    _check_size(queue, size)
    group_id = None if entry.get("MessageGroupId") is None else _printable_id(entry, "MessageGroupId")
    deduplication_id = None if entry.get("MessageDeduplicationId") is None else _printable_id(
        entry, "MessageDeduplicationId")
    if queue.fifo:
        if group_id is None:
            raise errors.MissingParameter("The request must contain the parameter MessageGroupId.")
        if entry.get("DelaySeconds") not in (None, 0, "0"):
            raise errors.invalid_value("DelaySeconds", entry["DelaySeconds"],
                                       "The request include parameter that is not valid for this queue type.")
        delay = queue.delay_seconds  # an explicit 0 means the queue's delay, as absent does
        if deduplication_id is None:
            if not queue.content_based_deduplication:
                raise errors.InvalidParameterValue(_NO_DEDUPLICATION_ID)
            deduplication_id = hashlib.sha256(body.encode("utf-8")).hexdigest()
    elif deduplication_id is not None:
        raise errors.invalid_value("MessageDeduplicationId", deduplication_id,
                                   "The request includes a parameter that is not valid for this queue type.")
    attributes = messages.stored_attributes(raw_attributes) if raw_attributes else None
    system = messages.stored_attributes(raw_system) if raw_system else None
    assert delay is not None
    return NewMessage(
        body=body,
        md5_of_body=messages.md5_of_body(body),
        delay_seconds=delay,
        attributes=attributes,
        md5_of_attributes=messages.md5_of_attributes(attributes) if attributes else None,
        trace_header=system["AWSTraceHeader"]["StringValue"] if system else None,
        md5_of_system_attributes=messages.md5_of_attributes(system) if system else None,
        group_id=group_id,
        deduplication_id=deduplication_id,
        size=size,
    ), size


def _check_size(queue: Queue, size: int) -> None:
    if size > queue.maximum_message_size:
        raise errors.InvalidParameterValue(
            f"One or more parameters are invalid. Reason: Message must be shorter than {queue.maximum_message_size} bytes."
        )


def _printable_id(entry: dict[str, Any], name: str) -> str | None:
    value = params.string(entry, name)
    if value is not None and not _PRINTABLE_ID.fullmatch(value):
        raise errors.invalid_value(name, value, f"{name} can only include alphanumeric and punctuation "
                                                "characters. 1 to 128 in length.")
    return value


def _sent(sent: Any) -> dict[str, Any]:
    result = {"MessageId": sent.message_id, "MD5OfMessageBody": sent.md5_of_body}
    if sent.md5_of_attributes:
        result["MD5OfMessageAttributes"] = sent.md5_of_attributes
    if sent.md5_of_system_attributes:
        result["MD5OfMessageSystemAttributes"] = sent.md5_of_system_attributes
    if sent.sequence_number:
        result["SequenceNumber"] = sent.sequence_number
    return result


def _sending_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> Queue:
    queue = ctx.queue  # resolved and authorized by the door
    assert queue is not None
    if queue.subscribed_to is not None:
        raise errors.UnsupportedOperation(
            f"A subscription receives what is sent to its queue {queue.subscribed_to}; send there, not to it.")
    return queue


async def send_message(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = _sending_queue(engine, ctx, p)
    params.required(p, "MessageBody")
    message, _ = _new_message(queue, p)
    if message.trace_header is None:  # an explicit AWSTraceHeader wins over the X-Ray header
        message.trace_header = ctx.trace_header
    [sent] = await engine.send_messages(queue, [message], sender_id=ctx.sender_id)
    return _sent(sent)


async def send_message_batch(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = _sending_queue(engine, ctx, p)
    entries = _batch_entries(p, "SendMessageBatchRequestEntry")
    total = sum(_rough_size(e) for e in entries)
    if total > limits.MAX_MESSAGE_SIZE:
        raise errors.BatchRequestTooLong(
            f"Batch requests cannot be longer than {limits.MAX_MESSAGE_SIZE} bytes. You have sent {total} bytes."
        )
    if queue.fifo:
        _check_fifo_batch(queue, entries)
    failed, accepted = [], []
    for entry in entries:
        try:
            accepted.append((entry["Id"], _new_message(queue, entry)[0]))
        except errors.SQSError as error:
            failed.append(_failure(entry["Id"], error))
    if failed and accepted and queue.tags.get(ext.ATOMIC_BATCHES_TAG, "").lower() == "true":
        return _batch_answer([], _none_stored(entries, failed))
    successful = []
    if accepted:
        sent = await engine.send_messages(queue, [m for _, m in accepted], sender_id=ctx.sender_id)
        successful = [{"Id": entry_id, **_sent(s)} for (entry_id, _), s in zip(accepted, sent)]
    return _batch_answer(successful, failed)


def _none_stored(entries: list[dict[str, Any]], failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A whole-or-nothing batch with invalid entries: each of those with its reason, every valid one as not stored."""
    reasons = {f["Id"]: f for f in failed}
    named = ", ".join(f["Id"] for f in failed)
    return [reasons.get(entry["Id"]) or {
        "Id": entry["Id"], "SenderFault": True, "Code": ext.NOT_STORED_CODE,
        "Message": f"Not stored: the queue stores a batch whole ({ext.ATOMIC_BATCHES_TAG}) and entries {named} "
                   "are invalid."} for entry in entries]


def _check_fifo_batch(queue: Queue, entries: list[dict[str, Any]]) -> None:
    """On a FIFO queue an entry without a group, or without a deduplication id where one is needed,
    fails the whole request, not the entry, and as InvalidParameterValue (as SQS does; a SendMessage
    without a group is MissingParameter)."""
    for entry in entries:
        if entry.get("MessageGroupId") is None:
            raise errors.InvalidParameterValue("The request must contain the parameter MessageGroupId.")
        if entry.get("MessageDeduplicationId") is None and not queue.content_based_deduplication:
            raise errors.InvalidParameterValue(_NO_DEDUPLICATION_ID)


def _rough_size(entry: dict[str, Any]) -> int:
    """An entry's bytes toward the batch's 1 MiB (body and message attributes)."""
    body = entry.get("MessageBody")
    size = len(body.encode("utf-8", "surrogatepass")) if isinstance(body, str) else 0
    attributes = entry.get("MessageAttributes")
    if isinstance(attributes, dict):
        for name, value in attributes.items():
            size += len(str(name).encode("utf-8", "surrogatepass"))
            if isinstance(value, dict):
                for part in ("DataType", "StringValue", "BinaryValue"):
                    if isinstance(value.get(part), str):
                        size += len(value[part].encode("utf-8", "surrogatepass"))
    return size


# -- receive ---------------------------------------------------------------------

async def receive_message(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = ctx.queue  # resolved and authorized by the door
    assert queue is not None
    max_messages = params.integer(p, "MaxNumberOfMessages", 1, 1, limits.MAX_RECEIVE_MESSAGES,
                                  "Must be between 1 and 10, if provided.")
    visibility = params.integer(p, "VisibilityTimeout", queue.visibility_timeout, 0,
                                limits.MAX_VISIBILITY_TIMEOUT_SECONDS, _VISIBILITY_REASON)
    wait = params.integer(p, "WaitTimeSeconds", queue.receive_wait_seconds, 0, limits.MAX_WAIT_TIME_SECONDS,
                          "Must be >= 0 and <= 20, if provided.")
    # Each list is read only when sent: most receives ask for none.
    system_names: AbstractSet[str] = _NO_NAMES
    if "AttributeNames" in p or "MessageSystemAttributeNames" in p:
        system_names = set(params.string_list(p, "AttributeNames")) | set(
            params.string_list(p, "MessageSystemAttributeNames"))
    attribute_names = params.string_list(p, "MessageAttributeNames") if "MessageAttributeNames" in p else []
    attempt_id = _printable_id(p, "ReceiveRequestAttemptId") if queue.fifo else None
    assert max_messages is not None and visibility is not None and wait is not None
    client = ClientConnection(ctx.receive) if wait and ctx.receive is not None else None
    with_attributes = bool(system_names or attribute_names)  # most receives ask for none: Deliveries then
    received = await engine.receive_messages(queue, max_messages=max_messages, visibility_timeout=visibility,
                                            wait_seconds=wait, attempt_id=attempt_id, client=client,
                                            with_attributes=with_attributes)
    if not received:
        return {}
    if not with_attributes:
        return {"Messages": [{"MessageId": message_id, "ReceiptHandle": handle, "MD5OfBody": md5, "Body": body}
                             for message_id, handle, md5, body in received]}
    return {"Messages": [_message(m, system_names, attribute_names) for m in received]}


def _message(m: ReceivedMessage, system_names: AbstractSet[str], attribute_names: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "MessageId": m.message_id, "ReceiptHandle": m.receipt_handle, "MD5OfBody": m.md5_of_body, "Body": m.body,
    }
    if system_names:
        available = messages.system_attributes(m)
        chosen = available if "All" in system_names else {k: v for k, v in available.items() if k in system_names}
        if chosen:
            result["Attributes"] = chosen
    if attribute_names:
        messages.add_message_attributes(result, m, attribute_names)
    return result


# -- delete and change visibility -------------------------------------------------

async def delete_message(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = ctx.queue  # resolved and authorized by the door
    assert queue is not None
    handle = params.string(p, "ReceiptHandle", required_=True)
    assert handle is not None
    return _only_outcome(await engine.delete_messages(queue, [handle]))


async def delete_message_batch(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = ctx.queue  # resolved and authorized by the door
    assert queue is not None
    entries = _batch_entries(p, "DeleteMessageBatchRequestEntry")
    handles = [entry.get("ReceiptHandle") for entry in entries]
    failed_early: dict[str, errors.SQSError] = {}
    for handle in handles:  # every entry names a handle (nearly always): no call per entry
        if not isinstance(handle, str) or not handle:
            handles, failed_early = _parse_entries(entries, _receipt_handle)
            break
    outcomes = await engine.delete_messages(queue, handles)
    return _batch_result(entries, failed_early, outcomes)


def _receipt_handle(entry: dict[str, Any]) -> str:
    handle = entry.get("ReceiptHandle")
    if not isinstance(handle, str) or not handle:
        raise errors.MissingParameter("The request must contain the parameter ReceiptHandle.")
    return handle


async def change_message_visibility(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = ctx.queue  # resolved and authorized by the door
    assert queue is not None
    handle = params.string(p, "ReceiptHandle", required_=True)
    timeout = params.integer(p, "VisibilityTimeout", None, 0, limits.MAX_VISIBILITY_TIMEOUT_SECONDS,
                             _VISIBILITY_REASON, required_=True)
    assert handle is not None and timeout is not None
    return _only_outcome(await engine.change_visibility(queue, [VisibilityChange(handle, timeout)]))


def _only_outcome(outcomes: list[Any]) -> dict[str, Any]:
    """The answer of a single-message action: empty, or the error of its one outcome."""
    [outcome] = outcomes
    if outcome.error:
        raise outcome.error
    return {}


async def change_message_visibility_batch(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = ctx.queue  # resolved and authorized by the door
    assert queue is not None
    entries = _batch_entries(p, "ChangeMessageVisibilityBatchRequestEntry")
    changes, failed_early = _parse_entries(entries, _visibility_change)
    outcomes = await engine.change_visibility(queue, changes) if changes else []
    return _batch_result(entries, failed_early, outcomes)


def _visibility_change(entry: dict[str, Any]) -> VisibilityChange:
    handle = params.string(entry, "ReceiptHandle", required_=True)
    timeout = params.integer(entry, "VisibilityTimeout", None, 0, limits.MAX_VISIBILITY_TIMEOUT_SECONDS,
                             _VISIBILITY_REASON, required_=True)
    assert handle is not None and timeout is not None
    return VisibilityChange(handle, timeout)


def _parse_entries(entries: list[dict[str, Any]],
                   parse: Callable[[dict[str, Any]], T]) -> tuple[list[T], dict[str, errors.SQSError]]:
    """Each batch entry parsed, and the SQS error of each entry that does not parse (by entry Id)."""
    parsed: list[T] = []
    failed_early: dict[str, errors.SQSError] = {}
    for entry in entries:
        try:
            parsed.append(parse(entry))
        except errors.SQSError as error:
            failed_early[entry["Id"]] = error
    return parsed, failed_early


# -- batches ---------------------------------------------------------------------

def _batch_entries(p: dict[str, Any], entry_name: str) -> list[dict[str, Any]]:
    """The entries of a batch request, checked as SQS checks them before anything runs."""
    entries = params.entries(p, entry_name)
    if len(entries) > limits.MAX_BATCH_ENTRIES:
        raise errors.TooManyEntriesInBatchRequest(
            f"Maximum number of entries per request are {limits.MAX_BATCH_ENTRIES}. You have sent {len(entries)}."
        )
    ids = [entry.get("Id") for entry in entries]
    try:  # every id valid and distinct (nearly always): one match for them all (an id with a "," is not)
        joined = ",".join(ids)
        if _BATCH_IDS.fullmatch(joined) and joined.count(",") == len(ids) - 1 and len(set(ids)) == len(ids):
            return entries
    except TypeError:  # an id that is not a string: found below
        pass
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry.get("Id")
        if not isinstance(entry_id, str) or not _BATCH_ID.fullmatch(entry_id):
            raise errors.InvalidBatchEntryId(
                "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
                "It can be at most 80 letters long."
            )
        if entry_id in seen:
            raise errors.BatchEntryIdsNotDistinct(f"Id {entry_id} repeated.")
        seen.add(entry_id)
    return entries


def _failure(entry_id: str, error: errors.SQSError) -> dict[str, Any]:
    wire = wire_error(error)
    return {"Id": entry_id, "SenderFault": wire.sender_fault, "Code": wire.query_code, "Message": error.message}


def _batch_result(entries: list[dict[str, Any]], failed_early: dict[str, errors.SQSError],
                  outcomes: list[EntryOutcome]) -> dict[str, Any]:
    if not failed_early and outcomes.count(DONE) == len(entries):  # all succeeded: identity compares, in C
        return {"Successful": [{"Id": entry["Id"]} for entry in entries]}
    successful, failed = [], []
    remaining = iter(outcomes)
    for entry in entries:
        entry_id = entry["Id"]
        error: Exception | None = failed_early.get(entry_id)
        if error is None:
            error = next(remaining).error
        if error is None:
            successful.append({"Id": entry_id})
        else:
            assert isinstance(error, errors.SQSError)
            failed.append(_failure(entry_id, error))
    return _batch_answer(successful, failed)


def _batch_answer(successful: list[dict[str, Any]], failed: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch's answer: SQS leaves an empty list out (no `"Failed": []` when every entry succeeded)."""
    answer: dict[str, Any] = {}
    if successful:
        answer["Successful"] = successful
    if failed:
        answer["Failed"] = failed
    return answer
