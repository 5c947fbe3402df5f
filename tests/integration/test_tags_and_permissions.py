"""TagQueue, UntagQueue, ListQueueTags, AddPermission and RemovePermission."""

from __future__ import annotations

import json

from support.sqs import raises_code, raises_modeled

# --- tags --------------------------------------------------------------------------------


def _tags(sqs, url):
    return sqs.list_queue_tags(QueueUrl=url).get("Tags", {})


def test_a_new_queue_has_no_tags(sqs, queue_url):
    assert _tags(sqs, queue_url) == {}


def test_tag_queue_adds_tags_that_list_queue_tags_returns(sqs, queue_url):
    sqs.tag_queue(QueueUrl=queue_url, Tags={"team": "core", "cost-center": "42"})
    assert _tags(sqs, queue_url) == {"team": "core", "cost-center": "42"}


def test_tag_queue_merges_with_existing_tags_and_overwrites_same_keys(sqs, make_queue):
    url = make_queue(tags={"a": "1", "b": "2"})
    sqs.tag_queue(QueueUrl=url, Tags={"b": "20", "c": "3"})
    assert _tags(sqs, url) == {"a": "1", "b": "20", "c": "3"}


def test_tag_keys_and_values_are_case_sensitive(sqs, queue_url):
    sqs.tag_queue(QueueUrl=queue_url, Tags={"Env": "Prod", "env": "prod"})
    assert _tags(sqs, queue_url) == {"Env": "Prod", "env": "prod"}


def test_untag_queue_removes_only_the_named_keys(sqs, make_queue):
    url = make_queue(tags={"a": "1", "b": "2", "c": "3"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["a", "c"])
    assert _tags(sqs, url) == {"b": "2"}


def test_untagging_a_key_that_is_not_there_is_harmless(sqs, make_queue):
    url = make_queue(tags={"a": "1"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["zzz"])
    assert _tags(sqs, url) == {"a": "1"}


def test_tags_allow_unicode_and_empty_values(sqs, queue_url):
    tags = {"owner": "J\u00fcrgen \U0001F600", "empty": ""}
    sqs.tag_queue(QueueUrl=queue_url, Tags=tags)
    assert _tags(sqs, queue_url) == tags


def test_tags_of_one_queue_do_not_leak_to_another(sqs, make_queue):
    a = make_queue(tags={"only": "a"})
    b = make_queue()
    assert _tags(sqs, a) == {"only": "a"}
    assert _tags(sqs, b) == {}


# --- permissions ---------------------------------------------------------------------------


def _policy(sqs, url):
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"]).get("Attributes", {})
    raw = attrs.get("Policy")
    return json.loads(raw) if raw else None


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _statements(policy):
    return _as_list(policy["Statement"]) if policy else []


def _arn(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]


def test_add_permission_appears_in_the_policy_as_a_statement_named_by_the_label(sqs, queue_url):
    sqs.add_permission(QueueUrl=queue_url, Label="let-them-send",
                       AWSAccountIds=["111122223333", "444455556666"],
                       Actions=["SendMessage", "ReceiveMessage"])
    policy = _policy(sqs, queue_url)
    assert policy is not None, "AddPermission must produce a Policy attribute"
    assert policy.get("Version") == "2008-10-17"
    (stmt,) = _statements(policy)
    assert stmt["Sid"] == "let-them-send"
    assert stmt["Effect"] == "Allow"
    assert stmt["Resource"] == _arn(sqs, queue_url)
    actions = {a.lower() for a in _as_list(stmt["Action"])}
    assert actions == {"sqs:sendmessage", "sqs:receivemessage"}
    principals = " ".join(_as_list(stmt["Principal"]["AWS"]))
    assert "111122223333" in principals and "444455556666" in principals


def test_a_second_label_adds_a_second_statement(sqs, queue_url):
    sqs.add_permission(QueueUrl=queue_url, Label="one", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    sqs.add_permission(QueueUrl=queue_url, Label="two", AWSAccountIds=["444455556666"],
                       Actions=["DeleteMessage"])
    assert sorted(s["Sid"] for s in _statements(_policy(sqs, queue_url))) == ["one", "two"]


def test_remove_permission_removes_just_that_statement(sqs, queue_url):
    for label in ("keep", "drop"):
        sqs.add_permission(QueueUrl=queue_url, Label=label, AWSAccountIds=["111122223333"],
                           Actions=["SendMessage"])
    sqs.remove_permission(QueueUrl=queue_url, Label="drop")
    assert [s["Sid"] for s in _statements(_policy(sqs, queue_url))] == ["keep"]


def test_removing_the_last_permission_leaves_no_statements(sqs, queue_url):
    sqs.add_permission(QueueUrl=queue_url, Label="only", AWSAccountIds=["111122223333"],
                       Actions=["*"])
    sqs.remove_permission(QueueUrl=queue_url, Label="only")
    assert _statements(_policy(sqs, queue_url)) == []


def test_add_permission_with_a_label_already_used_is_refused(sqs, queue_url):
    sqs.add_permission(QueueUrl=queue_url, Label="dup", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    with raises_code("InvalidParameterValue"):
        sqs.add_permission(QueueUrl=queue_url, Label="dup", AWSAccountIds=["444455556666"],
                           Actions=["ReceiveMessage"])
    (stmt,) = _statements(_policy(sqs, queue_url))
    assert "111122223333" in json.dumps(stmt) and "444455556666" not in json.dumps(stmt)


def test_remove_permission_with_an_unknown_label_is_refused(sqs, queue_url):
    with raises_code("InvalidParameterValue"):
        sqs.remove_permission(QueueUrl=queue_url, Label="never-added")


def test_add_permission_with_more_than_seven_actions_fails_with_over_limit(sqs, queue_url):
    actions = ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
               "GetQueueAttributes", "GetQueueUrl", "ListQueueTags", "PurgeQueue"]
    with raises_modeled(sqs, "OverLimit"):
        sqs.add_permission(QueueUrl=queue_url, Label="greedy", AWSAccountIds=["111122223333"],
                           Actions=actions)
    assert _statements(_policy(sqs, queue_url)) == []


def test_a_permission_policy_survives_other_attribute_changes(sqs, queue_url):
    sqs.add_permission(QueueUrl=queue_url, Label="stay", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "40"})
    assert [s["Sid"] for s in _statements(_policy(sqs, queue_url))] == ["stay"]


def test_a_permission_added_to_a_queue_with_a_policy_joins_its_statements(sqs, queue_url):
    arn = _arn(sqs, queue_url)
    policy = {"Version": "2012-10-17", "Statement": [
        {"Sid": "existing", "Effect": "Allow", "Principal": {"AWS": "*"},
         "Action": "SQS:SendMessage", "Resource": arn}]}
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": json.dumps(policy)})
    sqs.add_permission(QueueUrl=queue_url, Label="added", AWSAccountIds=["111122223333"],
                       Actions=["ReceiveMessage"])
    assert sorted(s["Sid"] for s in _statements(_policy(sqs, queue_url))) == ["added", "existing"]
