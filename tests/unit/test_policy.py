"""The policy evaluator and the credentials file on their own: pure functions, no server needed."""

from __future__ import annotations

import json

import pytest

from queueserver.auth.credentials import CredentialsError, parse_credentials
from queueserver.auth.policy import AccessRequest, PolicyError, Verdict, parse_policy, readable_denies

QUEUE = "arn:aws:sqs:us-east-1:111111111111:orders"
BOB = "arn:aws:iam::222222222222:user/bob"


def request(action: str = "sqs:SendMessage", resource: str = QUEUE, arn: str = BOB, **context: str) -> AccessRequest:
    account = arn.split(":")[4]
    return AccessRequest(action, resource, arn, account, {k.replace("_", ":").lower(): v for k, v in context.items()})


def queue_policy(*statements: dict) -> object:
    return parse_policy(json.dumps({"Version": "2012-10-17", "Statement": list(statements)}), resource_policy=True)


def allow(principal: object = "*", action: object = "sqs:SendMessage", **extra: object) -> dict:
    return {"Effect": "Allow", "Principal": principal, "Action": action, "Resource": QUEUE, **extra}


def test_actions_match_with_wildcards_and_without_regard_to_case():
    policy = queue_policy(allow(action=["SQS:send*"]))
    assert policy.verdict(request("sqs:SendMessage")) is Verdict.ALLOW
    assert policy.verdict(request("sqs:ReceiveMessage")) is None


def test_resources_match_with_wildcards_and_with_regard_to_case():
    policy = queue_policy({**allow(), "Resource": "arn:aws:sqs:*:111111111111:ord?rs"})
    assert policy.verdict(request()) is Verdict.ALLOW
    assert policy.verdict(request(resource=QUEUE.upper())) is None


def test_an_account_principal_allows_on_behalf_of_the_account_a_user_arn_allows_the_user():
    assert queue_policy(allow({"AWS": "222222222222"})).verdict(request()) is Verdict.ALLOW_ACCOUNT
    assert queue_policy(allow({"AWS": "arn:aws:iam::222222222222:root"})).verdict(request()) is Verdict.ALLOW_ACCOUNT
    assert queue_policy(allow({"AWS": [BOB]})).verdict(request()) is Verdict.ALLOW
    assert queue_policy(allow({"AWS": "333333333333"})).verdict(request()) is None


def test_an_explicit_deny_wins_whatever_the_order_of_statements():
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": "*"}
    assert queue_policy(allow(), deny).verdict(request()) is Verdict.DENY
    assert queue_policy(deny, allow()).verdict(request()) is Verdict.DENY


def test_not_action_and_not_resource_cover_everything_else():
    policy = queue_policy({"Effect": "Deny", "Principal": "*", "NotAction": "sqs:Receive*", "NotResource": QUEUE})
    assert policy.verdict(request("sqs:SendMessage", resource=QUEUE + "-other")) is Verdict.DENY
    assert policy.verdict(request("sqs:ReceiveMessage", resource=QUEUE + "-other")) is None
    assert policy.verdict(request("sqs:SendMessage")) is None


@pytest.mark.parametrize(("condition", "context", "holds"), [
    ({"StringLike": {"aws:PrincipalArn": "arn:aws:iam::*:user/b*"}}, {"aws_principalarn": BOB}, True),
    ({"StringEquals": {"aws:SourceAccount": "111111111111"}}, {}, False),
    ({"StringEqualsIfExists": {"aws:SourceAccount": "111111111111"}}, {}, True),
    ({"StringNotEquals": {"aws:SourceAccount": "111111111111"}}, {}, True),
    ({"ArnLike": {"aws:SourceArn": "arn:aws:sns:*:111111111111:*"}},
     {"aws_sourcearn": "arn:aws:sns:us-east-1:111111111111:topic"}, True),
    ({"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "192.168.1.0/24"]}}, {"aws_sourceip": "192.168.1.7"}, True),
    ({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, {"aws_sourceip": "::1"}, False),
    ({"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, {"aws_sourceip": "127.0.0.1"}, True),
    ({"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}, {"aws_currenttime": "2029-12-31T23:59:59Z"}, True),
    ({"DateGreaterThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}, {"aws_currenttime": "2029-12-31T23:59:59Z"},
     False),
    ({"NumericLessThan": {"aws:EpochTime": "1000"}}, {"aws_epochtime": "999"}, True),
    ({"Bool": {"aws:SecureTransport": True}}, {"aws_securetransport": "false"}, False),
    ({"Null": {"aws:SourceArn": "true"}}, {}, True),
    ({"StringEquals": {"aws:PrincipalAccount": "222222222222"}, "Bool": {"aws:SecureTransport": "true"}},
     {"aws_principalaccount": "222222222222", "aws_securetransport": "false"}, False),
])
def test_conditions_follow_iams_rules(condition, context, holds):
    policy = queue_policy(allow(Condition=condition))
    assert (policy.verdict(request(**context)) is Verdict.ALLOW) is holds


@pytest.mark.parametrize(("statement", "complaint"), [
    ({"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}, "Principal is missing"),
    (allow(principal={"Federated": "cognito-identity.amazonaws.com"}), "other principal types are not supported"),
    (allow(principal={"CanonicalUser": "79a59df900b949e55d96a1e698fbaced"}), "other principal types"),
    (allow(principal={"Service": "not a service"}), "invalid service principal"),
    (allow(Condition={"StringFuzzy": {"aws:SourceIp": "x"}}), "unsupported condition operator"),
    (allow(Condition={"ForSomeValues:StringEquals": {"aws:TagKeys": "x"}}), "unsupported condition set operator"),
    (allow(Condition={"BinaryEquals": {"aws:Username": "not base64!"}}), "not values this operator reads"),
    (allow({"AWS": "222222222222"}, Resource="arn:aws:sqs:*:*:${aws:username}"), "policy variables"),
    (allow(Condition={"IpAddress": {"aws:SourceIp": "not-a-network"}}), "not values this operator reads"),
    ({**allow(), "Effect": "Maybe"}, "Effect must be"),
])
def test_a_policy_this_evaluator_cannot_honour_is_refused_not_half_read(statement, complaint):
    with pytest.raises(PolicyError, match=complaint):
        queue_policy(statement)


def test_a_service_principal_matches_no_key_and_the_deny_beside_it_still_holds():
    service = allow({"Service": "sns.amazonaws.com"})
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:ReceiveMessage", "Resource": "*"}
    policy = queue_policy(service, deny)
    assert policy.verdict(request("sqs:SendMessage")) is None
    assert policy.verdict(request("sqs:ReceiveMessage")) is Verdict.DENY
    both = queue_policy(allow({"Service": ["sns.amazonaws.com"], "AWS": "222222222222"}))
    assert both.verdict(request()) is Verdict.ALLOW_ACCOUNT


@pytest.mark.parametrize(("condition", "context", "holds"), [
    ({"ForAnyValue:StringLike": {"aws:PrincipalAccount": ["1*", "2*"]}}, {"aws_principalaccount": "222"}, True),
    ({"ForAnyValue:StringLike": {"aws:PrincipalAccount": "1*"}}, {"aws_principalaccount": "222"}, False),
    ({"ForAnyValue:StringEquals": {"aws:SourceAccount": "111111111111"}}, {}, False),
    ({"ForAnyValue:StringEqualsIfExists": {"aws:SourceAccount": "111111111111"}}, {}, True),
    ({"ForAllValues:StringEquals": {"aws:SourceAccount": "111111111111"}}, {}, True),
    ({"ForAllValues:StringEquals": {"aws:PrincipalAccount": "111"}}, {"aws_principalaccount": "222"}, False),
    ({"ForAllValues:StringNotEquals": {"aws:PrincipalAccount": "111"}}, {"aws_principalaccount": "222"}, True),
    ({"BinaryEquals": {"aws:Username": "Ym9i"}}, {"aws_username": "bob"}, True),
    ({"BinaryEquals": {"aws:Username": "Ym9i"}}, {"aws_username": "eve"}, False),
    ({"ArnNotLike": {"aws:PrincipalArn": "arn:aws:iam::*:user/e*"}}, {"aws_principalarn": BOB}, True),
    ({"StringNotLike": {"aws:PrincipalArn": "*bob"}}, {"aws_principalarn": BOB}, False),
    ({"NumericGreaterThanEquals": {"aws:EpochTime": "1000"}}, {"aws_epochtime": "1000"}, True),
    ({"DateNotEquals": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}, {"aws_currenttime": "2030-01-01T00:00:00Z"},
     False),
    ({"StringEqualsIgnoreCase": {"aws:Username": "BOB"}}, {"aws_username": "bob"}, True),
    ({"Null": {"aws:Username": "false"}}, {"aws_username": "bob"}, True),
])
def test_each_operator_family_and_the_set_operators_follow_iams_rules(condition, context, holds):
    policy = queue_policy(allow(Condition=condition))
    assert (policy.verdict(request(**context)) is Verdict.ALLOW) is holds


def test_a_stored_policy_that_does_not_parse_keeps_every_deny_it_can_read_and_grants_nothing():
    text = json.dumps({"Statement": [
        allow(),
        {"Effect": "Deny", "Principal": "*", "Action": "sqs:ReceiveMessage", "Resource": "*"},
        {"Effect": "Deny", "Principal": {"Federated": "x"}, "Action": "sqs:SendMessage", "Resource": "*"}]})
    with pytest.raises(PolicyError):
        parse_policy(text, resource_policy=True)
    kept = readable_denies(text)
    assert kept.verdict(request("sqs:ReceiveMessage")) is Verdict.DENY
    assert kept.verdict(request("sqs:SendMessage")) is None  # no Allow survives: nothing is granted
    assert readable_denies("{not json").statements == ()


def test_an_identity_policy_names_no_principal():
    with pytest.raises(PolicyError, match="names no Principal"):
        parse_policy(json.dumps({"Statement": [allow()]}), resource_policy=False)
    identity = parse_policy(json.dumps({"Statement": {"Effect": "Allow", "Action": "sqs:*", "Resource": QUEUE}}),
                            resource_policy=False)
    assert identity.verdict(request()) is Verdict.ALLOW


def test_the_credentials_file_gives_each_key_its_account_and_principal():
    keys = parse_credentials('''
[keys.AKIDPRODUCER]
secret_access_key = "s1"
account_id = "111111111111"
name = "orders-producer"
policy = \'\'\'{"Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}]}\'\'\'

[keys.AKIDROOT]
secret_access_key = "s2"
account_id = "222222222222"
''')
    assert keys["AKIDPRODUCER"].arn == "arn:aws:iam::111111111111:user/orders-producer"
    assert keys["AKIDPRODUCER"].policy is not None
    assert keys["AKIDROOT"].arn == "arn:aws:iam::222222222222:root" and keys["AKIDROOT"].policy is None


@pytest.mark.parametrize(("text", "complaint"), [
    ("not toml [", "not valid TOML"),
    ("[keys]\n", "at least one"),
    ('[keys.A]\nsecret_access_key = "s"\naccount_id = 111111111111\n', "12 digits"),
    ('[keys.A]\naccount_id = "111111111111"\n', "secret_access_key"),
    ('[keys.A]\nsecret_access_key = "s"\naccount_id = "111111111111"\nrole = "x"\n', "unknown field"),
    ('[keys.A]\nsecret_access_key = "s"\naccount_id = "111111111111"\npolicy = "{"\n', "not valid JSON"),
])
def test_a_broken_credentials_file_is_refused_with_the_reason(text, complaint):
    with pytest.raises(CredentialsError, match=complaint):
        parse_credentials(text)
