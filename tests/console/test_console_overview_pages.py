"""The overview's pages and its name-prefix filter, clicked through in chromium against a server of their own
(this module's: other modules' queues do not shift its pages)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect
from support.subscriptions import subscribe

QUEUES = [f"a-{i:03d}" for i in range(10)] + [f"page-{i:03d}" for i in range(240)]  # creation order: name order


@pytest.fixture(scope="module")
def paged_queues(console_sqs: Any) -> dict[str, str]:
    urls = {name: console_sqs.create_queue(QueueName=name)["QueueUrl"] for name in QUEUES}
    for name in ("audit", "billing"):
        subscribe(console_sqs, urls["page-050"], name)
    policy = json.dumps({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:a-000", "maxReceiveCount": 5})
    for i in range(200, 212):  # on the last page: a-000 names the first ten, and counts the others
        console_sqs.set_queue_attributes(QueueUrl=urls[f"page-{i}"], Attributes={"RedrivePolicy": policy})
    return urls


def _shown(page: Any) -> list[str]:
    return [row.get_attribute("data-queue") for row in page.locator("tbody tr[data-queue]").all()]


def _link(page: Any, name: str) -> Any:
    return page.locator("#queues .pager").get_by_role("link", name=name)


def test_the_overview_pages_through_every_queue_a_hundred_at_a_time_both_ways(
        page: Any, console_server: Any, paged_queues: dict[str, str]) -> None:
    page.goto(console_server.endpoint + "/console")
    rows = page.locator("tbody tr[data-queue]")
    expect(rows).to_have_count(100)
    assert _shown(page) == QUEUES[:100]
    expect(_link(page, "Previous page")).to_have_count(0)
    # A queue's subscriptions stay under it and are not among the hundred.
    expect(page.locator("tbody tr.subscription")).to_have_count(2)
    expect(page.locator("tr[data-queue=page-050] + tr")).to_have_attribute("data-subscription", "page-050~audit")
    expect(page.locator("tr[data-queue=a-000]")).to_contain_text(
        "DLQ of " + ", ".join(f"page-{i}" for i in range(200, 210)) + " and 2 more")

    _link(page, "Next page").click()
    expect(rows.first).to_have_attribute("data-queue", QUEUES[100])
    assert _shown(page) == QUEUES[100:200]
    _link(page, "Next page").click()
    expect(rows).to_have_count(50)
    assert _shown(page) == QUEUES[200:]
    expect(_link(page, "Next page")).to_have_count(0)

    _link(page, "Previous page").click()
    expect(rows.first).to_have_attribute("data-queue", QUEUES[100])
    assert _shown(page) == QUEUES[100:200]
    _link(page, "Previous page").click()
    expect(rows.first).to_have_attribute("data-queue", QUEUES[0])
    assert _shown(page) == QUEUES[:100]
    expect(_link(page, "Previous page")).to_have_count(0)
    expect(_link(page, "Next page")).to_have_count(1)


def test_the_prefix_filter_pages_only_the_queues_whose_name_starts_with_it(
        page: Any, console_server: Any, paged_queues: dict[str, str]) -> None:
    page.goto(console_server.endpoint + "/console")
    page.locator("form.filter input[name=prefix]").fill("page-1")
    page.locator("form.filter").get_by_role("button", name="Filter").click()
    rows = page.locator("tbody tr[data-queue]")
    expect(rows.first).to_have_attribute("data-queue", "page-100")
    assert _shown(page) == [f"page-{i}" for i in range(100, 200)]  # exactly a page: no next one
    expect(_link(page, "Next page")).to_have_count(0)

    page.goto(console_server.endpoint + "/console?prefix=page-")
    expect(rows).to_have_count(100)
    _link(page, "Next page").click()
    expect(rows.first).to_have_attribute("data-queue", "page-100")
    _link(page, "Next page").click()
    assert _shown(page) == [f"page-{i}" for i in range(200, 240)]
    assert "prefix=page-" in page.url

    page.goto(console_server.endpoint + "/console?prefix=PAGE")  # as ListQueues: the case counts
    expect(page.locator("tbody td.empty")).to_have_text("No queues whose name starts with “PAGE”.")


def test_the_refresh_fetches_the_page_shown_and_a_heading_sorts_that_page(
        page: Any, console_server: Any, console_sqs: Any, paged_queues: dict[str, str]) -> None:
    page.goto(console_server.endpoint + "/console")
    _link(page, "Next page").click()
    rows = page.locator("tbody tr[data-queue]")
    expect(rows.first).to_have_attribute("data-queue", "page-090")
    shown_at = page.url
    console_sqs.send_message(QueueUrl=paged_queues["page-150"], MessageBody="counted on page 2")
    with page.expect_response(lambda response: response.request.resource_type == "fetch", timeout=15_000) as info:
        pass  # the section refreshes itself every 5 s
    assert info.value.url == shown_at
    assert len(re.findall(r"<tr data-queue=", info.value.text())) == 100
    expect(page.locator("tr[data-queue=page-150] [data-count=visible]")).to_have_text("1")

    page.locator("#queues thead").get_by_role("link", name=re.compile("^Visible")).click()  # ascending
    page.locator("#queues thead").get_by_role("link", name=re.compile("^Visible")).click()  # descending
    expect(rows.first).to_have_attribute("data-queue", "page-150")
    assert sorted(_shown(page)) == QUEUES[100:200]
