"""The SNS API's door: what each action needs, declared in one table, evaluated before its handler runs.

Each action names the IAM action it is authorized as and what it acts on: a topic (named by its
TopicArn, TargetArn or ResourceArn), a subscription's topic, or the account. With credentials off
every request is the owner's and every queue takes its topics' deliveries. With credentials on, as
IAM and SNS decide: an explicit Deny in the key's identity policy or the topic's Policy wins; on its
own account's topic a key may act unless its identity policy leaves the action out; on another
account's topic only where the topic's Policy allows it (the default Policy allows the owner's
account alone, through its `AWS:SourceOwner` condition). A delivery needs the queue's Policy to allow
`sqs:SendMessage` to the service `sns.amazonaws.com` (or to everyone), its conditions tested with
`aws:SourceArn` = the topic: the policy every SNS-to-SQS tutorial writes. A policy this server cannot
read grants nothing (fail closed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from queueserver import errors
from queueserver.auth import Principal
from queueserver.auth.policy import AccessRequest, Policy, PolicyError, Verdict, parse_policy
from queueserver.models import Queue, Topic
from queueserver.protocol.sns.topic_actions import default_policy
from queueserver.storage import QueueEngine

TOPIC, SUBSCRIPTION, ACCOUNT, PUBLIC = "topic", "subscription", "account", "public"
SNS_PRINCIPAL = "sns.amazonaws.com"
_KEPT = 256  # parsed policies kept per kind; a full cache starts again empty


@dataclass(frozen=True)
class Rule:
    iam_action: str
    resource: str
    member: str = ""  # the member naming the topic or subscription


RULES: dict[str, Rule] = {
    "CreateTopic": Rule("sns:CreateTopic", ACCOUNT),
    "DeleteTopic": Rule("sns:DeleteTopic", TOPIC, "TopicArn"),
    "ListTopics": Rule("sns:ListTopics", ACCOUNT),
    "GetTopicAttributes": Rule("sns:GetTopicAttributes", TOPIC, "TopicArn"),
    "SetTopicAttributes": Rule("sns:SetTopicAttributes", TOPIC, "TopicArn"),
    "Subscribe": Rule("sns:Subscribe", TOPIC, "TopicArn"),
    "ConfirmSubscription": Rule("sns:ConfirmSubscription", TOPIC, "TopicArn"),
    "Unsubscribe": Rule("sns:Unsubscribe", SUBSCRIPTION, "SubscriptionArn"),
    "ListSubscriptions": Rule("sns:ListSubscriptions", ACCOUNT),
    "ListSubscriptionsByTopic": Rule("sns:ListSubscriptionsByTopic", TOPIC, "TopicArn"),
    "GetSubscriptionAttributes": Rule("sns:GetSubscriptionAttributes", SUBSCRIPTION, "SubscriptionArn"),
    "SetSubscriptionAttributes": Rule("sns:SetSubscriptionAttributes", SUBSCRIPTION, "SubscriptionArn"),
    "Publish": Rule("sns:Publish", TOPIC, "TopicArn"),
    "PublishBatch": Rule("sns:Publish", TOPIC, "TopicArn"),  # no IAM action of its own
    "TagResource": Rule("sns:TagResource", TOPIC, "ResourceArn"),
    "UntagResource": Rule("sns:UntagResource", TOPIC, "ResourceArn"),
    "ListTagsForResource": Rule("sns:ListTagsForResource", TOPIC, "ResourceArn"),
    "AddPermission": Rule("sns:AddPermission", TOPIC, "TopicArn"),
    "RemovePermission": Rule("sns:RemovePermission", TOPIC, "TopicArn"),
    # The signing certificate of the envelopes, fetched by consumers that check signatures (as AWS's is public).
    "GetSigningCertificate": Rule("", PUBLIC),
}


class SnsAuthorization:
    """The one entry point: `authorize` before a handler runs, `may_deliver` at each delivery."""

    def __init__(self, credentials_on: bool) -> None:
        self.credentials_on = credentials_on
        self._topic_policies: dict[str, Policy | None] = {}
        self._queue_policies: dict[str, Policy | None] = {}

    def authorize(self, action: str, engine: QueueEngine | None = None, caller: Principal | None = None,
                  params: dict[str, Any] | None = None) -> None:
        """InvalidAction for an action not in the table; AuthorizationError unless `caller` may run it."""
        rule = RULES.get(action)
        if rule is None:
            raise errors.InvalidAction(f"The action {action} is not valid for this endpoint.")
        if rule.resource == PUBLIC or not self.credentials_on:
            return
        if caller is None or engine is None:
            raise errors.AuthorizationError(f"User is not authorized to perform: {rule.iam_action}")
        if action in ("CreateTopic", "SetTopicAttributes"):
            check_readable(params or {})
        resource, owner, policy = "*", caller.account, None
        if rule.resource != ACCOUNT:
            resource, owner, topic = _target(engine, rule, params or {})
            if topic is not None:
                policy = self._topic_policy(topic)
        denial = _denial(caller, rule.iam_action, resource, owner, policy)
        if denial is not None:
            raise errors.AuthorizationError(denial)

    def _topic_policy(self, topic: Topic) -> Policy | None:
        text = topic.attributes.get("Policy") or default_policy(topic)
        if text not in self._topic_policies:
            if len(self._topic_policies) >= _KEPT:
                self._topic_policies.clear()
            try:
                self._topic_policies[text] = parse_policy(text, resource_policy=True)
            except PolicyError:
                self._topic_policies[text] = None  # unreadable: it grants nothing
        return self._topic_policies[text]

    def may_deliver(self, queue: Queue, topic: Topic) -> bool:
        """Whether the queue lets the topic send to it: with credentials off always; with them on, only
        where its Policy allows sns.amazonaws.com (or everyone) sqs:SendMessage and denies nothing."""
        if not self.credentials_on:
            return True
        text = queue.attributes.get("Policy")
        if not text:
            return False
        if text not in self._queue_policies:
            if len(self._queue_policies) >= _KEPT:
                self._queue_policies.clear()
            self._queue_policies[text] = _service_policy(text)
        policy = self._queue_policies[text]
        if policy is None:
            return False
        context = {"aws:sourcearn": topic.arn, "aws:sourceaccount": topic.account, "aws:sourceowner": topic.account}
        request = AccessRequest("sqs:SendMessage", queue.arn, SNS_PRINCIPAL, topic.account, context)
        return policy.verdict(request) is Verdict.ALLOW


def _target(engine: QueueEngine, rule: Rule, params: dict[str, Any]) -> tuple[str, str, Topic | None]:
    """(the resource ARN, its account, the topic if it exists) a request names; a malformed ARN is left
    for the handler to refuse with its own error (it names no account, so only the caller's own rules apply)."""
    arn = params.get(rule.member) or (params.get("TargetArn") if rule.member == "TopicArn" else None)
    if not isinstance(arn, str):
        return "*", "", None
    parts = arn.split(":")
    if len(parts) < 6 or parts[2] != "sns":
        return arn, "", None
    if rule.resource == SUBSCRIPTION:
        subscription = engine.topics.subscription(arn)
        topic = engine.topics.topic_of(subscription) if subscription is not None else None
        return (topic.arn, topic.account, topic) if topic is not None else (arn, parts[4], None)
    return arn, parts[4], engine.topics.get(parts[3], parts[4], parts[5]) if len(parts) == 6 else None


def _denial(caller: Principal, iam_action: str, resource: str, owner: str, policy: Policy | None) -> str | None:
    """Why the policies refuse the request, or None (as SQS's queue policies are judged, for a topic)."""
    key = caller.key
    context = {**caller.context, "aws:sourceowner": key.account}
    request = AccessRequest(iam_action, resource, key.arn, key.account, context)
    identity = key.policy.verdict(request) if key.policy is not None else None
    granted = policy.verdict(request) if policy is not None else None
    if identity is Verdict.DENY or granted is Verdict.DENY:
        reason = f"with an explicit deny in {'an identity' if identity is Verdict.DENY else 'a resource'}-based policy"
    elif owner and owner != key.account:  # another account's topic: its Policy must allow it
        if granted is not None and (key.policy is None or identity is not None):
            return None
        reason = f"because no resource-based policy allows the {iam_action} action"
    else:
        if key.policy is None or identity is not None or granted is Verdict.ALLOW:
            return None
        reason = f"because no identity-based policy allows the {iam_action} action"
    return f"User: {key.arn} is not authorized to perform: {iam_action} on resource: {resource} {reason}"


def check_readable(params: dict[str, Any]) -> None:
    """With credentials on, a topic Policy this server cannot evaluate is refused when set (it would be
    read as granting nothing, and a Deny in it would be lost)."""
    text = None
    if params.get("AttributeName") == "Policy":
        text = params.get("AttributeValue")
    elif isinstance(params.get("Attributes"), dict):
        text = params["Attributes"].get("Policy")
    if isinstance(text, str) and text:
        try:
            parse_policy(text, resource_policy=True)
        except (PolicyError, ValueError, RecursionError) as exc:
            raise errors.InvalidParameter(f"Invalid parameter: Policy Error: {exc}") from None


def _service_policy(text: str) -> Policy | None:
    """The statements of a queue Policy that concern the SNS service (or everyone), their principal made
    `*` so that the evaluator reads them; None if the document cannot be read (it grants nothing)."""
    try:
        document = json.loads(text)
        statements = document.get("Statement") if isinstance(document, dict) else None
        if isinstance(statements, dict):
            statements = [statements]
        kept = [{**s, "Principal": "*"} for s in statements or () if isinstance(s, dict) and _names_sns(s)]
        return parse_policy(json.dumps({"Version": "2012-10-17", "Statement": kept}), resource_policy=True)
    except (PolicyError, ValueError, TypeError, RecursionError):
        return None


def _names_sns(statement: dict[str, Any]) -> bool:
    principal = statement.get("Principal")
    if principal == "*" or (isinstance(principal, dict) and principal.get("AWS") == "*"):
        return True
    services = principal.get("Service") if isinstance(principal, dict) else None
    listed = [services] if isinstance(services, str) else services if isinstance(services, list) else []
    return SNS_PRINCIPAL in listed
