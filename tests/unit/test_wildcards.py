"""The policy patterns' matcher (`*` any run, `?` any one character) against a regex reference.

The reference is the backtracking translation the matcher must agree with: fine on short
inputs, hopeless on long ones (which is why the server does not use it).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queueserver.auth.conditions import parse_conditions
from queueserver.auth.policy import AccessRequest, Verdict, parse_policy
from queueserver.auth.wildcards import Wildcard, like

QUEUE_ARN = "arn:aws:sqs:us-east-1:111111111111:"
# Few letters, so that patterns and texts overlap often; `.` and `[` are literal in a policy, not regex.
_patterns = st.text(alphabet="ab.[*?", max_size=10)
_texts = st.text(alphabet="ab.[", max_size=12)


def reference(pattern: str, text: str, ignore_case: bool = False) -> bool:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(body, text, re.DOTALL | (re.IGNORECASE if ignore_case else 0)) is not None


@settings(max_examples=3000, deadline=None, derandomize=True, database=None)
@given(_patterns, _texts)
def test_the_matcher_agrees_with_the_regex_translation_on_every_short_input(pattern, text):
    assert Wildcard(pattern).match(text) == reference(pattern, text)
    assert like(pattern, text) == reference(pattern, text)


@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet="aB*?", max_size=8), st.text(alphabet="AbaB", max_size=10))
def test_ignoring_case_agrees_with_the_regex_translation_too(pattern, text):
    assert Wildcard(pattern, ignore_case=True).match(text) == reference(pattern, text, ignore_case=True)


@pytest.mark.parametrize("pattern, text, expected", [
    ("", "", True), ("", "a", False), ("*", "", True), ("*", "anything at all", True), ("?", "", False),
    ("a*", "a", True), ("*a", "ba", True), ("*a", "ab", False), ("a*b*c", "abbbbc", True), ("a*b*c", "acb", False),
    ("*ab*ab*", "abab", True), ("*ab*ab*", "aba", False), ("a?c", "abc", True), ("a?c", "ac", False),
    ("*?", "", False), ("??*", "ab", True), ("*a?b*", "xxaxbyy", True), ("**", "", True),
    ("sqs:Send*", "sqs:SendMessage", True), ("sqs:Send*", "sqs:ReceiveMessage", False),
])
def test_stars_and_question_marks_mean_what_iam_says(pattern, text, expected):
    assert Wildcard(pattern).match(text) is expected


def test_fifty_wildcards_against_eighty_characters_are_answered_at_once_either_way():
    """The regex translation of these never finishes: `*a` fifty times before a `b` the text lacks."""
    name = QUEUE_ARN + "a" * 80
    assert not Wildcard(QUEUE_ARN + "*a" * 50 + "*b").match(name)
    assert Wildcard(QUEUE_ARN + "*a" * 50 + "*").match(name)
    assert not Wildcard(QUEUE_ARN + "*a" * 81 + "*").match(name)
    assert not Wildcard(QUEUE_ARN + "*?" * 81 + "*").match(name)
    assert Wildcard(QUEUE_ARN + "?a" * 40 + "*").match(name)


def test_every_like_operator_and_the_policy_elements_use_the_matcher():
    evil = "*a" * 50 + "*b"
    conditions = parse_conditions({op: {"aws:PrincipalArn": evil} for op in ("StringLike", "ArnLike")}
                                  | {op: {"aws:Username": evil} for op in ("StringNotLike", "ArnNotLike")})
    context = {"aws:principalarn": "a" * 80, "aws:username": "a" * 80}
    assert [c.holds(context) for c in conditions] == [False, False, True, True]
    assert all(isinstance(p, Wildcard) for c in conditions for p in c.patterns)
    policy = parse_policy(json.dumps({"Statement": [{
        "Effect": "Deny", "Principal": {"AWS": "arn:aws:iam::222222222222:user/" + evil},
        "Action": "sqs:" + evil, "Resource": QUEUE_ARN + evil}]}), resource_policy=True)
    request = AccessRequest("sqs:" + "a" * 80, QUEUE_ARN + "a" * 80, "arn:aws:iam::222222222222:user/" + "a" * 80,
                            "222222222222", {})
    assert policy.verdict(request) is None


def test_a_principal_arn_with_wildcards_names_the_users_it_matches():
    policy = parse_policy(json.dumps({"Statement": [{
        "Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam::222222222222:user/ci-*"]},
        "Action": "sqs:SendMessage", "Resource": QUEUE_ARN + "orders"}]}), resource_policy=True)

    def verdict(user: str) -> Verdict | None:
        return policy.verdict(AccessRequest("sqs:SendMessage", QUEUE_ARN + "orders",
                                            f"arn:aws:iam::222222222222:user/{user}", "222222222222", {}))

    assert verdict("ci-builder") is Verdict.ALLOW
    assert verdict("bob") is None
