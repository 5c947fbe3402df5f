"""Topics in the console against real servers, over plain HTTP (and one click-through in chromium): the list,
a topic's page with its subscriptions' endpoint queues and filters, and the publish form, which runs Publish
through the SNS door as the logged-in key (so a key denied sns:Publish is refused, and another account's
topics are not listed)."""

from __future__ import annotations

import html
import http.client
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote_plus, urlencode, urlsplit

import boto3
import pytest
from botocore.config import Config
from playwright.sync_api import expect
from support.auth import KEYS, OTHER_ACCOUNT, OWNER_ACCOUNT, secret_of, signed_client, write_credentials
from support.console import Browser
from support.server import running

ACCOUNT = "000000000000"
TOPIC_PAGE = "/console/topics/us-east-1/{account}/{name}"
# A key of the owner's account allowed everything but publishing.
NO_PUBLISH_KEY = {"AKIDNOPUBLISH": {"secret_access_key": "nopublish-secret", "account_id": OWNER_ACCOUNT,
                                    "name": "no-publish", "policy": json.dumps({"Version": "2012-10-17", "Statement": [
                                        {"Effect": "Allow", "Action": "*", "Resource": "*"},
                                        {"Effect": "Deny", "Action": "sns:Publish", "Resource": "*"}]})}}


def _sns(endpoint: str, key_id: str = "test", secret: str = "test") -> Any:
    return boto3.client("sns", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                        aws_secret_access_key=secret, config=Config(retries={"total_max_attempts": 1}))


def _publish(browser: Browser, path: str, **fields: str) -> tuple[int, str]:
    """Post the topic page's form (with the page's token); (status, the redirect's notice or error, or the body)."""
    token = browser.cookies["qs_console_csrf"]
    status, headers, body = browser.request("POST", path + "/publish", {"csrf_token": token, **fields})
    if status == 303:
        assert headers["location"].startswith(path + "?"), headers["location"]
        return status, unquote_plus(headers["location"].split("=", 1)[1])
    return status, body


def _post_with(server: Any, path: str, fields: dict[str, str], headers: dict[str, str]) -> int:
    address = urlsplit(server.endpoint)
    conn = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    try:
        conn.request("POST", path, body=urlencode(fields).encode(),
                     headers={"content-type": "application/x-www-form-urlencoded", **headers})
        return conn.getresponse().status
    finally:
        conn.close()


def _bodies(sqs: Any, url: str) -> list[str]:
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
    return sorted(m["Body"] for m in got)


def test_the_list_shows_the_topics_and_a_topic_page_its_subscriptions_with_their_filters(
        console_server: Any, console_sqs: Any) -> None:
    sns = _sns(console_server.endpoint)
    topic = sns.create_topic(Name="console-orders")["TopicArn"]
    sns.create_topic(Name="console-audit")
    queue_url = console_sqs.create_queue(QueueName="console-orders-q")["QueueUrl"]
    queue_arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:console-orders-q"
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={
        "RawMessageDelivery": "true", "FilterPolicyScope": "MessageBody",
        "FilterPolicy": json.dumps({"kind": ["order"]})})
    assert queue_url

    browser = Browser(console_server.endpoint)
    status, _, listed = browser.request("GET", "/console/topics")
    assert status == 200
    for name in ("console-orders", "console-audit"):
        assert f'<a href="{TOPIC_PAGE.format(account=ACCOUNT, name=name)}">{name}</a>' in listed
    assert '<a href="/console/topics">Topics</a>' in listed  # the navigation links the list

    status, _, shown = browser.request("GET", TOPIC_PAGE.format(account=ACCOUNT, name="console-orders"))
    assert status == 200
    row = re.search(r'<table class="subscriptions" id="subscriptions">.*?</table>', shown, re.S)
    assert row is not None
    cells = html.unescape(row.group(0))
    assert '<a href="/console/queues/us-east-1/000000000000/console-orders-q">console-orders-q</a>' in cells
    assert '<td class="raw">true</td>' in cells
    assert '<code>{"kind": ["order"]}</code>' in cells
    assert '<td class="scope">MessageBody</td>' in cells
    assert f'<code id="topic-arn">{topic}</code>' in shown and 'class="publish"' in shown

    status, _, missing = browser.request("GET", TOPIC_PAGE.format(account=ACCOUNT, name="no-such-topic"))
    assert (status, "No topic no-such-topic in us-east-1" in missing) == (404, True)


def test_publishing_with_the_form_delivers_what_the_filters_let_through(
        console_server: Any, console_sqs: Any) -> None:
    sns = _sns(console_server.endpoint)
    topic = sns.create_topic(Name="console-publish")["TopicArn"]
    urls = {}
    for name, attributes in (("console-publish-all", {"RawMessageDelivery": "true"}),
                             ("console-publish-orders", {"RawMessageDelivery": "true",
                                                         "FilterPolicyScope": "MessageBody",
                                                         "FilterPolicy": json.dumps({"kind": ["order"]})}),
                             ("console-publish-envelope", {})):
        urls[name] = console_sqs.create_queue(QueueName=name)["QueueUrl"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}",
                      Attributes=attributes)
    browser = Browser(console_server.endpoint)
    path = TOPIC_PAGE.format(account=ACCOUNT, name="console-publish")
    assert browser.request("GET", path)[0] == 200  # sets the form's token cookie
    order, other = json.dumps({"kind": "order"}), json.dumps({"kind": "refund"})
    status, notice = _publish(browser, path, message=order, subject="from the console")
    assert status == 303 and re.fullmatch(r"Message [0-9a-f-]{36} published\.", notice), notice
    assert _publish(browser, path, message=other)[0] == 303
    assert _bodies(console_sqs, urls["console-publish-all"]) == sorted([order, other])
    assert _bodies(console_sqs, urls["console-publish-orders"]) == [order]
    envelopes = [json.loads(b) for b in _bodies(console_sqs, urls["console-publish-envelope"])]
    assert sorted((e["Message"], e.get("Subject")) for e in envelopes) == sorted(
        [(order, "from the console"), (other, None)])

    # SNS's own validation answers a bad form, and nothing is delivered.
    status, error = _publish(browser, path, message="")
    assert (status, error.split(":", 1)[0]) == (303, "InvalidParameter"), error
    # Without the form's token, or with it from another site's page: refused, nothing delivered.
    status, _, _ = browser.request("POST", path + "/publish", {"message": "forged"})
    assert status == 403
    token = browser.cookies["qs_console_csrf"]
    for foreign in ({"origin": "http://evil.example"}, {"sec-fetch-site": "cross-site"}):
        assert _post_with(console_server, path + "/publish", {"csrf_token": token, "message": "forged"},
                          {"cookie": f"qs_console_csrf={token}", **foreign}) == 403, foreign
    assert _bodies(console_sqs, urls["console-publish-all"]) == []


def test_a_fifo_topic_is_published_to_with_its_group_and_deduplication_id(
        console_server: Any, console_sqs: Any) -> None:
    sns = _sns(console_server.endpoint)
    sns.create_topic(Name="console-fifo.fifo", Attributes={"FifoTopic": "true"})
    url = console_sqs.create_queue(QueueName="console-fifo-q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sns.subscribe(TopicArn=f"arn:aws:sns:us-east-1:{ACCOUNT}:console-fifo.fifo", Protocol="sqs",
                  Endpoint=f"arn:aws:sqs:us-east-1:{ACCOUNT}:console-fifo-q.fifo",
                  Attributes={"RawMessageDelivery": "true"})
    browser = Browser(console_server.endpoint)
    path = TOPIC_PAGE.format(account=ACCOUNT, name="console-fifo.fifo")
    status, _, shown = browser.request("GET", path)
    assert status == 200 and 'name="MessageGroupId" required' in shown and 'name="MessageDeduplicationId"' in shown
    for _ in range(2):  # the same deduplication id: delivered once
        assert _publish(browser, path, message="first", MessageGroupId="g1", MessageDeduplicationId="d1")[0] == 303
    status, error = _publish(browser, path, message="no group")
    assert (status, error.split(":", 1)[0]) == (303, "InvalidParameter"), error
    got = console_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"])
    assert [(m["Body"], m["Attributes"]["MessageGroupId"]) for m in got["Messages"]] == [("first", "g1")]


@pytest.fixture(scope="module")
def credentials_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    folder = tmp_path_factory.mktemp("console-topics")
    keys = write_credentials(folder / "keys.toml", {**KEYS, **NO_PUBLISH_KEY})
    with running(folder / "q.db", "--test-clock", "--credentials", str(keys)) as server:
        yield server


def _logged_in(server: Any, key_id: str, secret: str) -> Browser:
    browser = Browser(server.endpoint)
    assert browser.login(key_id, secret) == (303, "/console/"), key_id
    return browser


def test_with_credentials_a_key_denied_publish_is_refused_and_another_account_sees_no_topic(
        credentials_server: Any) -> None:
    endpoint = credentials_server.endpoint
    alice_sns, alice_sqs = _sns(endpoint, "AKIDALICE", secret_of("AKIDALICE")), signed_client(
        "json", endpoint, "AKIDALICE")
    topic = alice_sns.create_topic(Name="private-topic")["TopicArn"]
    url = alice_sqs.create_queue(QueueName="private-topic-q")["QueueUrl"]
    queue_arn = f"arn:aws:sqs:us-east-1:{OWNER_ACCOUNT}:private-topic-q"
    alice_sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps({
        "Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"}, "Action": "sqs:SendMessage",
            "Resource": queue_arn, "Condition": {"ArnEquals": {"aws:SourceArn": topic}}}]})})
    alice_sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    _sns(endpoint, "AKIDBOB", secret_of("AKIDBOB")).create_topic(Name="bobs-topic")
    path = TOPIC_PAGE.format(account=OWNER_ACCOUNT, name="private-topic")

    denied = _logged_in(credentials_server, "AKIDNOPUBLISH", "nopublish-secret")
    status, _, shown = denied.request("GET", path)
    assert status == 200 and "private-topic-q" in shown and 'class="publish"' not in shown  # no form shown
    assert _publish(denied, path, message="forged by a key denied sns:Publish") == (
        403, "You may not Publish on this topic.")
    assert _bodies(alice_sqs, url) == []

    alice = _logged_in(credentials_server, "AKIDALICE", secret_of("AKIDALICE"))
    assert alice.request("GET", path)[0] == 200
    assert _publish(alice, path, message="from alice")[0] == 303
    assert _bodies(alice_sqs, url) == ["from alice"]  # the same form delivers for a key allowed to publish

    bob = _logged_in(credentials_server, "AKIDBOB", secret_of("AKIDBOB"))
    status, _, listed = bob.request("GET", "/console/topics")
    assert status == 200 and "bobs-topic" in listed and "private-topic" not in listed
    status, _, body = bob.request("GET", path)
    status_missing, _, missing = bob.request("GET", TOPIC_PAGE.format(account=OWNER_ACCOUNT, name="no-such-topic"))
    assert (status, status_missing) == (404, 404)
    assert body.replace("private-topic", "NAME") == missing.replace("no-such-topic", "NAME")
    assert _publish(bob, path, message="from bob")[0] == 404
    assert _bodies(alice_sqs, url) == []
    assert f"<td>{OTHER_ACCOUNT}</td>" in listed and f"<td>{OWNER_ACCOUNT}</td>" not in listed


def test_the_publish_form_is_clicked_through_in_chromium(page: Any, console_server: Any, console_sqs: Any) -> None:
    sns = _sns(console_server.endpoint)
    topic = sns.create_topic(Name="console-clicked")["TopicArn"]
    url = console_sqs.create_queue(QueueName="console-clicked-q")["QueueUrl"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:{ACCOUNT}:console-clicked-q",
                  Attributes={"RawMessageDelivery": "true"})
    page.goto(console_server.endpoint + "/console/")
    page.locator("header nav").get_by_role("link", name="Topics").click()
    page.get_by_role("link", name="console-clicked").click()
    expect(page.locator("#topic-arn")).to_have_text(topic)
    form = page.locator("form.publish")
    form.locator("textarea[name=message]").fill("clicked in chromium")
    form.get_by_role("button", name="Publish").click()
    expect(page.locator(".notice")).to_contain_text("published.")
    assert _bodies(console_sqs, url) == ["clicked in chromium"]
    page.locator("#subscriptions").get_by_role("link", name="console-clicked-q").click()
    expect(page.locator("h1")).to_contain_text("console-clicked-q")
