"""The SNS door is a declaration: every SNS action has its rule in protocol/sns/authorization.py, and
every rule names an action the dispatcher runs (or the public signing certificate)."""

from __future__ import annotations

import pytest

from queueserver import errors
from queueserver.protocol.sns.authorization import PUBLIC, RULES, SnsAuthorization
from queueserver.protocol.sns.dispatch import SnsDispatcher


def test_every_sns_action_has_a_rule_and_every_rule_an_action() -> None:
    actions = set(SnsDispatcher(engine=None, credentials_on=False).actions)  # type: ignore[arg-type]
    assert actions == {name for name, rule in RULES.items() if rule.resource != PUBLIC}
    assert all(rule.iam_action == f"sns:{name}" or name == "PublishBatch"
               for name, rule in RULES.items() if rule.resource != PUBLIC)


def test_with_credentials_on_an_unauthenticated_call_is_refused_but_the_certificate_and_unknown_is_invalid() -> None:
    door = SnsAuthorization(credentials_on=True)
    for name, rule in RULES.items():
        if rule.resource == PUBLIC:
            door.authorize(name)
        else:
            with pytest.raises(errors.AuthorizationError):
                door.authorize(name)  # no verified caller: nothing is allowed
    with pytest.raises(errors.InvalidAction):
        door.authorize("CreatePlatformApplication")
    SnsAuthorization(credentials_on=False).authorize("Publish")
