"""The SNS API's door: what each action needs, declared in one table, evaluated before its handler runs.

Each action names the IAM action it is authorized as and the resource it acts on (a topic, a
subscription's topic, the account). With credentials off every request is the owner's and is
allowed, and every queue accepts its topics' deliveries. With credentials on, topic policies and the
queue Policy that must allow the topic (`Principal: {"Service": "sns.amazonaws.com"}` with
`aws:SourceArn`) are not evaluated yet: the door fails closed and refuses every SNS request
(AuthorizationError), rather than allow what it cannot check.
"""

from __future__ import annotations

from dataclasses import dataclass

from queueserver import errors
from queueserver.models import Queue, Topic

TOPIC, SUBSCRIPTION, ACCOUNT, TAGGED, PUBLIC = "topic", "subscription", "account", "tagged resource", "public"


@dataclass(frozen=True)
class Rule:
    iam_action: str
    resource: str


RULES: dict[str, Rule] = {
    "CreateTopic": Rule("sns:CreateTopic", ACCOUNT),
    "DeleteTopic": Rule("sns:DeleteTopic", TOPIC),
    "ListTopics": Rule("sns:ListTopics", ACCOUNT),
    "GetTopicAttributes": Rule("sns:GetTopicAttributes", TOPIC),
    "SetTopicAttributes": Rule("sns:SetTopicAttributes", TOPIC),
    "Subscribe": Rule("sns:Subscribe", TOPIC),
    "ConfirmSubscription": Rule("sns:ConfirmSubscription", TOPIC),
    "Unsubscribe": Rule("sns:Unsubscribe", SUBSCRIPTION),
    "ListSubscriptions": Rule("sns:ListSubscriptions", ACCOUNT),
    "ListSubscriptionsByTopic": Rule("sns:ListSubscriptionsByTopic", TOPIC),
    "GetSubscriptionAttributes": Rule("sns:GetSubscriptionAttributes", SUBSCRIPTION),
    "SetSubscriptionAttributes": Rule("sns:SetSubscriptionAttributes", SUBSCRIPTION),
    "Publish": Rule("sns:Publish", TOPIC),
    "PublishBatch": Rule("sns:Publish", TOPIC),
    "TagResource": Rule("sns:TagResource", TAGGED),
    "UntagResource": Rule("sns:UntagResource", TAGGED),
    "ListTagsForResource": Rule("sns:ListTagsForResource", TAGGED),
    "AddPermission": Rule("sns:AddPermission", TOPIC),
    "RemovePermission": Rule("sns:RemovePermission", TOPIC),
    # The signing certificate of the envelopes, fetched by consumers that check signatures (as AWS's is public).
    "GetSigningCertificate": Rule("", PUBLIC),
}


class SnsAuthorization:
    """The one entry point: `authorize(action)` before a handler runs, `may_deliver` at each delivery."""

    def __init__(self, credentials_on: bool) -> None:
        self._credentials_on = credentials_on

    def authorize(self, action: str) -> None:
        rule = RULES.get(action)
        if rule is None:
            raise errors.InvalidAction(f"The action {action} is not valid for this endpoint.")
        if rule.resource == PUBLIC or not self._credentials_on:
            return
        raise errors.AuthorizationError(
            f"User is not authorized to perform: {rule.iam_action}: this server does not evaluate SNS "
            "authorization while credentials are on")

    def may_deliver(self, queue: Queue, topic: Topic) -> bool:
        """Whether the queue lets the topic send to it; with credentials off, always."""
        return not self._credentials_on
