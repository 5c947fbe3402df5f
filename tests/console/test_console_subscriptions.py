"""A queue's subscriptions in the console, clicked through in chromium against a real server."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect
from support.console import send_from_page
from support.subscriptions import extension_call, subscribe

SHOP = "/console/queues/us-east-1/000000000000/shop-events"


def _subscribe(page: Any, name: str, start_from: str = "new") -> None:
    form = page.locator("form.subscribe")
    form.locator("input[name=subscription]").fill(name)
    form.locator("select[name=start_from]").select_option(start_from)
    form.get_by_role("button", name="Create subscription").click()
    expect(page.locator(".notice")).to_have_text(f"Subscription {name} created.")


def _subscription_count(page: Any, name: str) -> Any:
    return page.locator(f"#subscriptions tr[data-subscription='{name}'] [data-count=visible]")


def test_a_subscription_is_created_counted_browsed_purged_alone_and_deleted(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    url = console_sqs.create_queue(QueueName="shop-events")["QueueUrl"]
    console_sqs.send_message(QueueUrl=url, MessageBody="before any subscription")
    page.goto(console_server.endpoint + SHOP)
    expect(page.locator("#subscriptions td.empty")).to_have_text("No subscriptions.")
    _subscribe(page, "billing")
    _subscribe(page, "audit", start_from="all")
    send_from_page(page, "order 1")
    send_from_page(page, "order 2")
    expect(_subscription_count(page, "billing")).to_have_text("2")  # only what was sent after it was created
    expect(_subscription_count(page, "audit")).to_have_text("3")  # StartFrom all: the message held before too
    expect(page.locator("#counts [data-count=visible]")).to_have_text("3")

    page.locator("#subscriptions").get_by_role("link", name="billing").click()
    expect(page.locator("h1")).to_contain_text("billing")
    expect(page.locator("h1 .kind")).to_have_text("subscription of shop-events")
    expect(page.locator("table.messages td.body")).to_have_text(["order 1", "order 2"])
    expect(page.locator("form.send")).to_have_count(0)  # sends go to the queue
    billing_url = next(s["SubscriptionUrl"] for s in _subscriptions(console_sqs, url)
                       if s["SubscriptionName"] == "billing")
    expect(page.locator("#queue-url")).to_have_text(billing_url)  # what a consumer is given
    console_sqs.receive_message(QueueUrl=billing_url, MaxNumberOfMessages=1, VisibilityTimeout=600)
    expect(page.locator("#counts [data-count=in_flight]")).to_have_text("1")

    page.on("dialog", lambda dialog: dialog.accept())
    purge = page.locator("form[action$='/purge']")
    purge.locator("input[name=confirm]").fill("billing")
    purge.get_by_role("button", name="Purge").click()
    expect(page.locator(".notice")).to_have_text("Subscription purged.")
    expect(page.locator("table.messages td.empty")).to_have_text("No messages.")
    expect(page.locator("#counts [data-count=visible]")).to_have_text("0")
    expect(page.locator("#counts [data-count=in_flight]")).to_have_text("0")

    page.locator(".crumbs").get_by_role("link", name="shop-events").click()
    expect(_subscription_count(page, "billing")).to_have_text("0")
    expect(_subscription_count(page, "audit")).to_have_text("3")  # the purge touched billing alone
    expect(page.locator("#counts [data-count=visible]")).to_have_text("3")
    delete = page.locator("#subscriptions tr[data-subscription=billing] form.unsubscribe")
    delete.locator("input[name=confirm]").fill("billing")
    delete.get_by_role("button", name="Delete").click()
    expect(page.locator(".notice")).to_have_text("Subscription billing deleted.")
    expect(page.locator("#subscriptions tr[data-subscription]")).to_have_count(1)
    assert [s["SubscriptionName"] for s in _subscriptions(console_sqs, url)] == ["audit"]


def test_the_overview_lists_subscriptions_under_their_queue_not_among_the_queues(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    url = console_sqs.create_queue(QueueName="fanned-out")["QueueUrl"]
    for name in ("zeta", "alpha"):
        subscribe(console_sqs, url, name)
    console_sqs.send_message(QueueUrl=url, MessageBody="to both")
    page.goto(console_server.endpoint + "/console?prefix=fanned")
    expect(page.locator("tbody tr[data-queue]")).to_have_count(1)
    queue_row = page.locator("tr[data-queue=fanned-out]")
    expect(queue_row).to_contain_text("2 subscriptions")
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(3)
    assert [r.get_attribute("data-subscription") for r in rows.all()[1:]] == ["fanned-out~alpha", "fanned-out~zeta"]
    alpha = page.locator("tr[data-subscription='fanned-out~alpha']")
    expect(alpha.locator("[data-count=visible]")).to_have_text("1")
    alpha.get_by_role("link", name="alpha").click()
    expect(page.locator("table.messages td.body")).to_have_text(["to both"])


def test_a_subscription_name_sqs_refuses_is_answered_with_its_error(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    url = console_sqs.create_queue(QueueName="refusing-events")["QueueUrl"]
    page.goto(console_server.endpoint + "/console/queues/us-east-1/000000000000/refusing-events")
    form = page.locator("form.subscribe")
    form.locator("input[name=subscription]").fill("not a name!")
    form.get_by_role("button", name="Create subscription").click()
    expect(page.locator(".error")).to_contain_text("InvalidParameterValue")
    assert _subscriptions(console_sqs, url) == []


def _subscriptions(sqs: Any, url: str) -> list[dict[str, str]]:
    status, answer = extension_call(sqs, "QueueserverListSubscriptions", QueueUrl=url)
    assert status == 200, answer
    return list(answer["Subscriptions"])


def test_a_send_posted_to_a_subscription_is_refused_and_sends_nothing(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    url = console_sqs.create_queue(QueueName="no-sends-here")["QueueUrl"]
    subscription = subscribe(console_sqs, url, "reader")
    page.goto(console_server.endpoint + "/console/queues/us-east-1/000000000000/no-sends-here~reader")
    expect(page.locator("h1 .kind")).to_have_text("subscription of no-sends-here")
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "qs_console_csrf")
    refused = page.request.post(page.url + "/send", form={"csrf_token": token, "body": "sneaked in"},
                                headers={"origin": console_server.endpoint}, max_redirects=0)
    assert refused.status == 404
    for target in (url, subscription):
        assert console_sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"]["ApproximateNumberOfMessages"] == "0"


def test_a_page_with_two_refreshing_sections_fetches_itself_once_per_tick(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    url = console_sqs.create_queue(QueueName="ticking")["QueueUrl"]
    subscribe(console_sqs, url, "watcher")
    page.clock.install()
    page.goto(console_server.endpoint + "/console/queues/us-east-1/000000000000/ticking")
    expect(page.locator("[data-refresh]")).to_have_count(2)  # the counts and the subscriptions
    fetches: list[Any] = []
    page.on("request", lambda request: fetches.append(request.url) if request.resource_type == "fetch" else None)
    # the timers fire inside run_for, so every fetch of the tick is under way before the first one's answer
    with page.expect_response(lambda response: response.request.resource_type == "fetch"):
        page.clock.run_for(3000)
    assert len(fetches) == 1, fetches
