"""What a person sees in a real headless chromium: the server's address leads to the console, every instant
is shown as a date, and every placeholder can be read whole."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect
from support.wire import raw_json_call

DATE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$")
# An instant written as epoch seconds (10 digits) or milliseconds (13), as the API gives them.
EPOCH = re.compile(r"(?<!\d)(\d{10}|\d{13})(?!\d)")
# How much of each placeholder its input can show: the text's width in the input's font against the room inside.
PLACEHOLDERS = """() => Array.from(document.querySelectorAll('input[placeholder]'), input => {
  const style = getComputedStyle(input);
  const context = document.createElement('canvas').getContext('2d');
  context.font = style.font;
  return {name: input.name, placeholder: input.placeholder, width: context.measureText(input.placeholder).width,
          room: input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)};
})"""


def _cut_placeholders(page: Any) -> list[dict[str, Any]]:
    shown = page.evaluate(PLACEHOLDERS)
    assert shown, "the page has no placeholder to measure"
    return [p for p in shown if p["width"] > p["room"]]


def test_opening_the_servers_address_lands_on_the_console(page: Any, console_server: Any) -> None:
    page.goto(console_server.endpoint + "/")
    assert page.url == console_server.endpoint + "/console/"
    expect(page.locator("h1")).to_have_text("Queues")
    assert _cut_placeholders(page) == []


def test_every_instant_on_a_dead_letter_queues_page_is_a_date_and_every_placeholder_fits(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    console_sqs.create_queue(QueueName="dated-dlq")
    source = console_sqs.create_queue(QueueName="dated-source", Attributes={"RedrivePolicy":
        '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:dated-dlq", "maxReceiveCount": "1"}'})["QueueUrl"]
    console_sqs.send_message_batch(QueueUrl=source, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)])
    for _ in range(20):  # a message's second receive moves it to the dead-letter queue instead
        if not console_sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages"):
            break
    page.goto(console_server.endpoint + "/console/queues/us-east-1/000000000000/dated-dlq")
    page.locator("form.redrive-start input[name=rate]").fill("1")
    page.get_by_role("button", name="Redrive to source queue").click()
    expect(page.locator("table.tasks tbody tr").first.locator(".status")).to_have_text(re.compile("RUNNING|COMPLETED"))

    expect(page.locator("table.tasks td.started").first).to_have_text(DATE)
    facts = {row.locator("th").inner_text(): row.locator("td").inner_text()
             for row in page.locator("table.facts tr").all()}
    assert DATE.match(facts["CreatedTimestamp"]) and DATE.match(facts["LastModifiedTimestamp"]), facts
    sent = page.locator("table.messages tbody tr td:nth-child(6)").all_inner_texts()
    assert sent and all(DATE.match(text) for text in sent), sent
    cells = page.locator("main td").all_inner_texts()
    assert [text for text in cells if EPOCH.search(text)] == []
    assert _cut_placeholders(page) == []


def test_the_confirmation_of_a_long_subscription_names_deletion_is_readable_whole(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    url = console_sqs.create_queue(QueueName="long-named")["QueueUrl"]
    name = "billing-and-invoices-for-every-region-we-serve"
    created = raw_json_call(console_server.endpoint, "QueueserverCreateSubscription",
                            {"QueueUrl": url, "SubscriptionName": name})
    assert created.status == 200, created.body
    page.goto(console_server.endpoint + "/console/queues/us-east-1/000000000000/long-named")
    expect(page.locator("form.unsubscribe input[name=confirm]")).to_have_attribute("placeholder", f"type {name}")
    assert _cut_placeholders(page) == []
