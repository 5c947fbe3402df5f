"""Applying the config file's queues at start-up, through the engine's public API.

Every queue is checked first (names, attributes, dead-letter queues) so that a bad file
changes nothing; then each is created if missing, or updated where its attributes or tags
differ from the file (the change is logged). Queues not in the file are left alone, and so
are attributes and tags the file does not mention.
"""

from __future__ import annotations

import json
import logging

from queueserver import errors
from queueserver.config import QueueDeclaration
from queueserver.errors import ConfigError
from queueserver.protocol import queue_attributes, redrive_policy
from queueserver.protocol.params import RequestContext
from queueserver.protocol.queue_actions import check_queue_name
from queueserver.storage import QueueEngine

log = logging.getLogger(__name__)


async def apply_queues(engine: QueueEngine, declarations: tuple[QueueDeclaration, ...], home_region: str) -> None:
    checked = {d.name: _check(engine, d, declarations) for d in declarations}
    for declaration in _targets_first(declarations):
        await _apply(engine, declaration, checked[declaration.name], home_region)


def _check(engine: QueueEngine, d: QueueDeclaration, all_declared: tuple[QueueDeclaration, ...]) -> dict[str, str]:
    """The queue's attributes as SQS would store them from CreateQueue, or a ConfigError naming the key."""
    where = f"key queues.{d.name}"
    fifo = d.name.endswith(".fifo")
    try:
        check_queue_name(d.name, fifo)
    except errors.SQSError as exc:
        raise ConfigError(f"{where}: bad queue name: {exc.message}") from None
    attributes = dict(d.attributes)
    if fifo:
        attributes.setdefault("FifoQueue", "true")
    for name, value in attributes.items():
        try:
            queue_attributes.check({name: value}, fifo=fifo, creating=False)
        except errors.SQSError as exc:
            raise ConfigError(f"{where}.{name}: {exc.message}") from None
    try:
        checked = queue_attributes.check(attributes, fifo=fifo, creating=True)
    except errors.SQSError as exc:
        raise ConfigError(f"{where}: {exc.message}") from None
    try:  # an existing queue: the rules between attributes, on what they would become
        queue_attributes.apply(engine.get_queue(d.region, d.account, d.name).attributes, checked)
    except errors.QueueDoesNotExist:
        pass
    except errors.SQSError as exc:
        raise ConfigError(f"{where}: {exc.message}") from None
    if d.dead_letter_queue is not None:
        target = d.dead_letter_queue
        declared = any((q.name, q.region, q.account) == (target, d.region, d.account) for q in all_declared)
        if not declared and not _exists(engine, d.region, d.account, target):
            raise ConfigError(f"{where}.dead_letter_queue: no queue {target} in the file or the database")
        if target.endswith(".fifo") != fifo:
            raise ConfigError(f"{where}.dead_letter_queue: {target} must be of the same type as {d.name} "
                              "(FIFO or standard)")
        checked["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": f"arn:aws:sqs:{d.region}:{d.account}:{target}",
             "maxReceiveCount": d.max_receive_count}, separators=(",", ":"))
    if "RedriveAllowPolicy" in checked:
        try:
            checked["RedriveAllowPolicy"] = redrive_policy.check_redrive_allow_policy(checked["RedriveAllowPolicy"])
        except errors.SQSError as exc:
            raise ConfigError(f"{where}.RedriveAllowPolicy: {exc.message}") from None
    return checked


def _exists(engine: QueueEngine, region: str, account: str, name: str) -> bool:
    try:
        engine.get_queue(region, account, name)
    except errors.QueueDoesNotExist:
        return False
    return True


def _targets_first(declarations: tuple[QueueDeclaration, ...]) -> list[QueueDeclaration]:
    """Dead-letter queues before the queues that name them, so that the redrive policies can be checked."""
    by_key = {(d.region, d.account, d.name): d for d in declarations}
    ordered: list[QueueDeclaration] = []
    seen: set[tuple[str, str, str]] = set()

    def visit(d: QueueDeclaration) -> None:
        key = (d.region, d.account, d.name)
        if key in seen:
            return
        seen.add(key)
        target = by_key.get((d.region, d.account, d.dead_letter_queue or ""))
        if target is not None:
            visit(target)
        ordered.append(d)

    for declaration in declarations:
        visit(declaration)
    return ordered


async def _apply(engine: QueueEngine, d: QueueDeclaration, supplied: dict[str, str], home_region: str) -> None:
    where = f"key queues.{d.name}"
    fifo = d.name.endswith(".fifo")
    ctx = RequestContext(region=d.region, account=d.account, base_url="", request_id="config", sender_id=d.account,
                         home_region=home_region)
    if "RedrivePolicy" in supplied:
        try:
            supplied["RedrivePolicy"] = redrive_policy.check_redrive_policy(
                engine, ctx, d.name, fifo, supplied["RedrivePolicy"])
        except errors.SQSError as exc:
            key = "dead_letter_queue" if d.dead_letter_queue else "RedrivePolicy"
            raise ConfigError(f"{where}.{key}: {exc.message}") from None
    try:
        queue = engine.get_queue(d.region, d.account, d.name)
    except errors.QueueDoesNotExist:
        defaults = {**queue_attributes.DEFAULTS, **(queue_attributes.FIFO_DEFAULTS if fifo else {})}
        try:
            attributes = queue_attributes.apply(defaults, supplied)
            await engine.create_queue(d.region, d.account, d.name, fifo=fifo, attributes=attributes,
                                      supplied=supplied, tags=d.tags)
        except errors.SQSError as exc:
            raise ConfigError(f"{where}: {exc.message}") from None
        log.info("config: created queue %s (%s, %s)", d.name, d.region, d.account)
        return
    changed = {k: v for k, v in supplied.items() if queue.attributes.get(k, "") != v}
    tags = {k: v for k, v in d.tags.items() if queue.tags.get(k) != v}
    if not changed and not tags:
        return

    def change(attributes: dict[str, str], current_tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        return queue_attributes.apply(attributes, changed), {**current_tags, **tags}

    try:
        await engine.update_queue(queue, change)
    except errors.SQSError as exc:
        raise ConfigError(f"{where}: {exc.message}") from None
    for name, value in changed.items():
        log.warning("config: queue %s: %s changed from %r to %r", d.name, name, queue.attributes.get(name, ""), value)
    for name, value in tags.items():
        log.warning("config: queue %s: tag %s changed from %r to %r", d.name, name, queue.tags.get(name), value)
