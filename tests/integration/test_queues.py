"""Queue life cycle: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue, PurgeQueue, regions."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError
from support.sqs import (
    BAD_ATTRIBUTE_VALUE,
    VALUES_AT_THE_EDGES,
    Counts,
    counts,
    raises_code,
    raises_modeled,
    receive,
    receive_all,
    send_bodies,
)
from support.wire import query_get, query_post

ACCOUNT = "000000000000"


# --- CreateQueue ---------------------------------------------------------------------


def test_create_queue_returns_a_url_made_of_the_request_host_the_account_and_the_name(
        sqs, server, queue_name):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    assert url == f"{server.endpoint}/{ACCOUNT}/{queue_name}"


def test_creating_a_queue_again_with_the_same_attributes_returns_the_same_url(sqs, queue_name):
    attrs = {"VisibilityTimeout": "45", "DelaySeconds": "3"}
    first = sqs.create_queue(QueueName=queue_name, Attributes=attrs)["QueueUrl"]
    second = sqs.create_queue(QueueName=queue_name, Attributes=attrs)["QueueUrl"]
    assert first == second
    assert len(sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"]) == 1


def test_creating_a_queue_again_without_attributes_returns_the_same_url(sqs, queue_name):
    first = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    assert sqs.create_queue(QueueName=queue_name)["QueueUrl"] == first


def test_creating_a_queue_again_with_different_attributes_fails_with_queue_name_exists(
        sqs, queue_name):
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    with raises_modeled(sqs, "QueueNameExists"):
        sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "46"})
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "45", "the failed create must not change the queue"


def test_create_queue_applies_the_given_attributes_and_tags(sqs, queue_name):
    attrs = {
        "VisibilityTimeout": "120",
        "DelaySeconds": "7",
        "MaximumMessageSize": "2048",
        "MessageRetentionPeriod": "3600",
        "ReceiveMessageWaitTimeSeconds": "4",
    }
    url = sqs.create_queue(QueueName=queue_name, Attributes=attrs,
                           tags={"team": "queues", "Env": "test"})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    for key, value in attrs.items():
        assert got[key] == value, key
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "queues", "Env": "test"}


def test_a_queue_name_of_80_letters_digits_hyphens_and_underscores_is_accepted(sqs):
    name = ("Ab_9-" + uuid.uuid4().hex)[:80].ljust(80, "x")
    assert len(name) == 80
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url.endswith("/" + name)
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url


@pytest.mark.parametrize("bad_name", [
    "x" * 81,
    "has space",
    "dot.in.name",
    "slash/name",
    "colon:name",
    "caf\u00e9",
    "star*",
], ids=["81-chars", "space", "dot", "slash", "colon", "non-ascii", "star"])
def test_an_invalid_queue_name_is_rejected_and_no_queue_is_made(sqs, bad_name):
    with raises_code("InvalidParameterValue"):
        sqs.create_queue(QueueName=bad_name)
    listed = sqs.list_queues().get("QueueUrls", [])
    assert not any(u.endswith("/" + bad_name) for u in listed)


def test_an_empty_queue_name_is_rejected(sqs):
    with raises_code("InvalidParameterValue", "MissingParameter"):
        sqs.create_queue(QueueName="")


def test_queue_names_are_case_sensitive(sqs):
    stem = uuid.uuid4().hex[:10]
    lower = sqs.create_queue(QueueName=f"case-{stem}")["QueueUrl"]
    upper = sqs.create_queue(QueueName=f"CASE-{stem}")["QueueUrl"]
    assert lower != upper
    sqs.send_message(QueueUrl=upper, MessageBody="upper")
    assert counts(sqs, lower).visible == 0
    assert counts(sqs, upper).visible == 1


def test_create_queue_with_an_unknown_attribute_fails_with_invalid_attribute_name(sqs, queue_name):
    with raises_modeled(sqs, "InvalidAttributeName"):
        sqs.create_queue(QueueName=queue_name, Attributes={"NoSuchAttribute": "1"})
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.get_queue_url(QueueName=queue_name)


@pytest.mark.parametrize("name,value", [
    ("VisibilityTimeout", "43201"),
    ("VisibilityTimeout", "-1"),
    ("VisibilityTimeout", "thirty"),
    ("DelaySeconds", "901"),
    ("DelaySeconds", "-1"),
    ("MaximumMessageSize", "1023"),
    ("MaximumMessageSize", "1048577"),
    ("MessageRetentionPeriod", "59"),
    ("MessageRetentionPeriod", "1209601"),
    ("ReceiveMessageWaitTimeSeconds", "21"),
    ("ReceiveMessageWaitTimeSeconds", "-1"),
])
def test_create_queue_with_an_out_of_range_attribute_fails_and_makes_no_queue(
        sqs, queue_name, name, value):
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.create_queue(QueueName=queue_name, Attributes={name: value})
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.get_queue_url(QueueName=queue_name)


@pytest.mark.parametrize("name,value", VALUES_AT_THE_EDGES)
def test_create_queue_accepts_attribute_values_at_the_edges_of_their_range(
        sqs, queue_name, name, value):
    url = sqs.create_queue(QueueName=queue_name, Attributes={name: value})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[name])["Attributes"]
    assert got == {name: value}


# --- GetQueueUrl -----------------------------------------------------------------------


def test_get_queue_url_returns_the_url_create_queue_gave(sqs, queue_name):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    assert sqs.get_queue_url(QueueName=queue_name)["QueueUrl"] == url


def test_get_queue_url_accepts_the_owner_account_id(sqs, queue_name):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    got = sqs.get_queue_url(QueueName=queue_name, QueueOwnerAWSAccountId=ACCOUNT)["QueueUrl"]
    assert got == url


def test_get_queue_url_of_an_unknown_queue_fails_with_queue_does_not_exist(sqs, queue_name):
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.get_queue_url(QueueName=queue_name)


def test_get_queue_url_is_case_sensitive(sqs, queue_name):
    sqs.create_queue(QueueName=queue_name.lower())
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.get_queue_url(QueueName=queue_name.upper())


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def _created_over_query(endpoint: str, name: str) -> str:
    return str(query_post(endpoint, {"Action": "CreateQueue", "QueueName": name}).text("CreateQueueResult/QueueUrl"))


# Query only: a Query request can be sent to a queue URL's path, a JSON one names its queue in the body.
@pytest.mark.parametrize("method", ["POST", "GET"])
@pytest.mark.parametrize("named", ["another queue", "the path's own queue"])
def test_get_queue_url_sent_to_a_queue_url_over_query_answers_the_named_queues_url(server, queue_name, method, named):
    path_queue = _created_over_query(server.endpoint, queue_name)
    other = _created_over_query(server.endpoint, f"{queue_name}-other")
    name, expected = (f"{queue_name}-other", other) if named == "another queue" else (queue_name, path_queue)
    ask = query_post if method == "POST" else query_get
    resp = ask(server.endpoint, {"Action": "GetQueueUrl", "QueueName": name}, path=_path(path_queue))
    assert resp.status == 200, resp.body
    assert resp.text("GetQueueUrlResult/QueueUrl") == expected


def test_get_queue_url_sent_to_a_queue_url_of_an_unknown_queue_is_queue_does_not_exist(server, queue_name):
    resp = query_post(server.endpoint, {"Action": "GetQueueUrl", "QueueName": "never-created-anywhere"},
                      path=_path(_created_over_query(server.endpoint, queue_name)))
    assert resp.status == 400, resp.body
    assert resp.text("Error/Code") == "AWS.SimpleQueueService.NonExistentQueue"


# --- ListQueues ------------------------------------------------------------------------


def _make_prefixed(sqs, n):
    prefix = f"lq{uuid.uuid4().hex[:10]}"
    urls = {sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(n)}
    return prefix, urls


def test_list_queues_with_a_prefix_returns_exactly_the_matching_queues(sqs):
    prefix, urls = _make_prefixed(sqs, 4)
    sqs.create_queue(QueueName=f"other-{prefix}")
    resp = sqs.list_queues(QueueNamePrefix=prefix)
    assert set(resp["QueueUrls"]) == urls
    assert len(resp["QueueUrls"]) == 4
    assert "NextToken" not in resp


def test_list_queues_without_a_prefix_includes_every_queue(sqs):
    _, urls = _make_prefixed(sqs, 2)
    # The shared server may hold more than one answer's 1,000 queues by now: page through them all.
    pages = sqs.get_paginator("list_queues").paginate(PaginationConfig={"PageSize": 1000})
    listed = {url for page in pages for url in page.get("QueueUrls", [])}
    assert urls <= listed


def test_list_queues_with_a_prefix_nothing_matches_returns_no_urls(sqs):
    resp = sqs.list_queues(QueueNamePrefix=f"nomatch{uuid.uuid4().hex}")
    assert resp.get("QueueUrls", []) == []
    assert "NextToken" not in resp


def test_list_queues_prefix_match_is_case_sensitive(sqs):
    prefix, urls = _make_prefixed(sqs, 1)
    assert sqs.list_queues(QueueNamePrefix=prefix.upper()).get("QueueUrls", []) == []


def test_list_queues_with_max_results_pages_through_every_match_with_next_token(sqs):
    prefix, urls = _make_prefixed(sqs, 5)
    seen: list[str] = []
    resp = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2)
    assert len(resp["QueueUrls"]) == 2
    assert resp.get("NextToken"), "more matches remain, so a NextToken must come back"
    pages = 1
    seen.extend(resp["QueueUrls"])
    while resp.get("NextToken"):
        resp = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2, NextToken=resp["NextToken"])
        page = resp.get("QueueUrls", [])
        assert len(page) <= 2
        seen.extend(page)
        pages += 1
        assert pages <= 5, "pagination does not terminate"
    assert sorted(seen) == sorted(urls), "every queue exactly once"


def test_list_queues_returns_no_next_token_when_max_results_is_not_set(sqs):
    prefix, urls = _make_prefixed(sqs, 3)
    resp = sqs.list_queues(QueueNamePrefix=prefix)
    assert set(resp["QueueUrls"]) == urls
    assert "NextToken" not in resp


def test_list_queues_with_max_results_covering_all_matches_returns_no_next_token(sqs):
    prefix, urls = _make_prefixed(sqs, 3)
    resp = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=10)
    assert set(resp["QueueUrls"]) == urls
    assert "NextToken" not in resp


def test_the_list_queues_paginator_yields_every_match(sqs):
    prefix, urls = _make_prefixed(sqs, 5)
    paginator = sqs.get_paginator("list_queues")
    seen = []
    for page in paginator.paginate(QueueNamePrefix=prefix, PaginationConfig={"PageSize": 2}):
        seen.extend(page.get("QueueUrls", []))
    assert sorted(seen) == sorted(urls)


@pytest.mark.parametrize("max_results", [0, -1, 1001])
def test_list_queues_with_max_results_out_of_range_fails(sqs, max_results):
    with raises_code("InvalidParameterValue"):
        sqs.list_queues(MaxResults=max_results)


def test_list_queues_with_a_garbled_next_token_gets_a_client_error_not_a_server_error(sqs):
    prefix, _ = _make_prefixed(sqs, 1)
    with pytest.raises(ClientError) as info:
        sqs.list_queues(QueueNamePrefix=prefix, MaxResults=1, NextToken="!!not-a-token!!")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


# --- DeleteQueue ---------------------------------------------------------------------


def test_a_deleted_queue_is_gone_for_every_action(sqs, queue_name):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="doomed")
    sqs.delete_queue(QueueUrl=url)
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.get_queue_url(QueueName=queue_name)
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.send_message(QueueUrl=url, MessageBody="late")
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.receive_message(QueueUrl=url)
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    assert url not in sqs.list_queues(QueueNamePrefix=queue_name).get("QueueUrls", [])


def test_deleting_a_queue_twice_fails_with_queue_does_not_exist(sqs, queue_url):
    sqs.delete_queue(QueueUrl=queue_url)
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.delete_queue(QueueUrl=queue_url)


@pytest.mark.parametrize("action", ["DeleteMessage", "ChangeMessageVisibility"])
def test_a_receipt_handle_of_a_deleted_queue_is_invalid_on_a_queue_of_the_same_name(sqs, queue_name, action):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="old")
    [old] = receive(sqs, url, VisibilityTimeout=600)
    sqs.delete_queue(QueueUrl=url)
    assert sqs.create_queue(QueueName=queue_name)["QueueUrl"] == url  # the newest queue again, same name
    sqs.send_message(QueueUrl=url, MessageBody="new")
    [new] = receive(sqs, url, VisibilityTimeout=600)
    with raises_modeled(sqs, "ReceiptHandleIsInvalid"):
        if action == "DeleteMessage":
            sqs.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
        else:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"], VisibilityTimeout=0)
    assert counts(sqs, url) == Counts(0, 1, 0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"])
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_queue_recreated_right_after_deletion_starts_empty_with_fresh_attributes(
        sqs, queue_name):
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "99"},
                           tags={"old": "yes"})["QueueUrl"]
    send_bodies(sqs, url, ["a", "b", "c"])
    receive(sqs, url)
    sqs.delete_queue(QueueUrl=url)
    again = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    assert again == url
    assert counts(sqs, again) == Counts(0, 0, 0)
    assert receive_all(sqs, again) == []
    attrs = sqs.get_queue_attributes(QueueUrl=again, AttributeNames=["VisibilityTimeout"])
    assert attrs["Attributes"]["VisibilityTimeout"] == "30"
    assert sqs.list_queue_tags(QueueUrl=again).get("Tags", {}) == {}


def test_deleting_one_queue_leaves_the_others_alone(sqs, make_queue):
    keep, drop = make_queue(), make_queue()
    sqs.send_message(QueueUrl=keep, MessageBody="stay")
    sqs.send_message(QueueUrl=drop, MessageBody="go")
    sqs.delete_queue(QueueUrl=drop)
    assert [m["Body"] for m in receive(sqs, keep)] == ["stay"]


# --- PurgeQueue ----------------------------------------------------------------------


def test_purge_queue_deletes_visible_in_flight_and_delayed_messages(sqs, queue_url):
    send_bodies(sqs, queue_url, [f"m{i}" for i in range(5)])
    sqs.send_message(QueueUrl=queue_url, MessageBody="delayed", DelaySeconds=300)
    in_flight = receive(sqs, queue_url, MaxNumberOfMessages=2, VisibilityTimeout=600)
    assert len(in_flight) == 2
    assert counts(sqs, queue_url) == Counts(3, 2, 1)
    sqs.purge_queue(QueueUrl=queue_url)
    assert counts(sqs, queue_url) == Counts(0, 0, 0)
    assert receive_all(sqs, queue_url) == []


def test_purged_messages_do_not_come_back_when_their_visibility_or_delay_ends(
        sqs, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="visible-later")
    sqs.send_message(QueueUrl=queue_url, MessageBody="delayed", DelaySeconds=60)
    assert len(receive(sqs, queue_url, VisibilityTimeout=30)) == 1
    sqs.purge_queue(QueueUrl=queue_url)
    clock.advance(61)
    assert receive_all(sqs, queue_url) == []


def test_a_queue_accepts_new_messages_right_after_a_purge(sqs, queue_url):
    send_bodies(sqs, queue_url, ["old"])
    sqs.purge_queue(QueueUrl=queue_url)
    send_bodies(sqs, queue_url, ["new"])
    assert [m["Body"] for m in receive_all(sqs, queue_url)] == ["new"]


def test_purging_twice_in_a_row_is_allowed_without_cooldowns(sqs, queue_url):
    sqs.purge_queue(QueueUrl=queue_url)
    sqs.purge_queue(QueueUrl=queue_url)


def test_purging_a_queue_leaves_other_queues_alone(sqs, make_queue):
    a, b = make_queue(), make_queue()
    send_bodies(sqs, a, ["a"])
    send_bodies(sqs, b, ["b"])
    sqs.purge_queue(QueueUrl=a)
    assert counts(sqs, b).visible == 1


# --- regions -------------------------------------------------------------------------


def test_queues_in_different_regions_are_separate(sqs, server, make_client, queue_name):
    eu = make_client(server.endpoint, region="eu-west-1")
    eu_url = eu.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "11"})["QueueUrl"]
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.get_queue_url(QueueName=queue_name)
    assert sqs.list_queues(QueueNamePrefix=queue_name).get("QueueUrls", []) == []

    # The same name in us-east-1 is another queue, with its own attributes.
    us_url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "22"})["QueueUrl"]
    eu.send_message(QueueUrl=eu_url, MessageBody="from-eu")
    assert receive(sqs, us_url) == []
    assert [m["Body"] for m in receive(eu, eu_url)] == ["from-eu"]
    assert eu.get_queue_attributes(QueueUrl=eu_url, AttributeNames=["VisibilityTimeout"])[
        "Attributes"]["VisibilityTimeout"] == "11"
    assert sqs.get_queue_attributes(QueueUrl=us_url, AttributeNames=["VisibilityTimeout"])[
        "Attributes"]["VisibilityTimeout"] == "22"


def test_the_queue_arn_carries_the_region_of_the_request(sqs, server, make_client, queue_name):
    eu = make_client(server.endpoint, region="eu-west-1")
    eu_url = eu.create_queue(QueueName=queue_name)["QueueUrl"]
    us_url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    eu_arn = eu.get_queue_attributes(QueueUrl=eu_url, AttributeNames=["QueueArn"])["Attributes"]
    us_arn = sqs.get_queue_attributes(QueueUrl=us_url, AttributeNames=["QueueArn"])["Attributes"]
    assert eu_arn["QueueArn"] == f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{queue_name}"
    assert us_arn["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{queue_name}"


def test_deleting_a_queue_in_one_region_leaves_its_namesake_in_another(
        sqs, server, make_client, queue_name):
    eu = make_client(server.endpoint, region="eu-west-1")
    eu_url = eu.create_queue(QueueName=queue_name)["QueueUrl"]
    us_url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    eu.delete_queue(QueueUrl=eu_url)
    assert sqs.get_queue_url(QueueName=queue_name)["QueueUrl"] == us_url
    with raises_modeled(eu, "QueueDoesNotExist"):
        eu.get_queue_url(QueueName=queue_name)
