"""The console clicked through in a real headless chromium, against a real server process."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from playwright.sync_api import expect
from support.console import send_from_page


def _open(page: Any, server: Any, path: str = "/console") -> None:
    page.goto(server.endpoint + path)


def _create(page: Any, server: Any, name: str, dead_letter_queue: str = "", max_receives: str = "") -> None:
    _open(page, server)
    form = page.locator("form.create")
    form.locator("input[name=name]").fill(name)
    if dead_letter_queue:
        form.locator("input[name=dead_letter_queue]").fill(dead_letter_queue)
        form.locator("input[name=max_receive_count]").fill(max_receives)
    form.get_by_role("button", name="Create queue").click()
    expect(page.locator("h1")).to_contain_text(name)
    expect(page.locator(".notice")).to_have_text(f"Queue {name} created.")


def _visible(page: Any) -> Any:
    return page.locator("#counts [data-count=visible]")


def test_a_queue_created_in_the_console_takes_messages_counts_them_and_is_purged_after_confirmation(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    _create(page, console_server, "clicked-orders")
    send_from_page(page, "first order")
    send_from_page(page, "second order")
    expect(page.locator("table.messages td.body")).to_have_text(["first order", "second order"])
    expect(_visible(page)).to_have_text("2")  # the section refreshes itself until the count cache catches up
    url = console_sqs.get_queue_url(QueueName="clicked-orders")["QueueUrl"]
    console_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=600)
    expect(page.locator("#counts [data-count=in_flight]")).to_have_text("1")
    _open(page, console_server)
    row = page.locator("tr[data-queue=clicked-orders]")
    expect(row.locator("[data-count=visible]")).to_have_text("1")
    row.get_by_role("link", name="clicked-orders").click()

    page.on("dialog", lambda dialog: dialog.accept())
    purge = page.locator("form[action$='/purge']")
    purge.locator("input[name=confirm]").fill("not-the-name")
    purge.get_by_role("button", name="Purge").click()
    expect(page.locator(".error")).to_contain_text("to confirm")
    assert console_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    purge = page.locator("form[action$='/purge']")
    purge.locator("input[name=confirm]").fill("clicked-orders")
    purge.get_by_role("button", name="Purge").click()
    expect(page.locator(".notice")).to_have_text("Queue purged.")
    expect(page.locator("table.messages td.empty")).to_have_text("No messages.")
    expect(_visible(page)).to_have_text("0")
    expect(page.locator("#counts [data-count=in_flight]")).to_have_text("0")


def test_a_body_with_markup_is_shown_as_text_and_never_runs(page: Any, console_server: Any) -> None:
    _create(page, console_server, "clicked-markup")
    body = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b>bold</b>'
    send_from_page(page, body)
    cell = page.locator("table.messages td.body")
    expect(cell).to_have_text(body)
    assert cell.locator("script, img, b").count() == 0
    assert page.evaluate("window.pwned") is None


def test_messages_are_browsed_page_by_page_without_being_received(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    url = console_sqs.create_queue(QueueName="clicked-pages")["QueueUrl"]
    for start in range(0, 25, 10):
        console_sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"message {i:02d}"} for i in range(start, min(start + 10, 25))])
    _open(page, console_server, "/console/queues/us-east-1/clicked-pages")
    bodies = page.locator("table.messages td.body")
    expect(bodies).to_have_count(20)
    expect(bodies.first).to_have_text("message 00")
    page.get_by_role("link", name="Next page").click()
    expect(bodies).to_have_text([f"message {i}" for i in range(20, 25)])
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    received = console_sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                           AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in received] == ["1"] * 10  # browsing received none


def test_a_dead_letter_queue_is_redriven_to_its_source_to_the_end(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    _create(page, console_server, "clicked-dlq")
    _create(page, console_server, "clicked-source", dead_letter_queue="clicked-dlq", max_receives="1")
    expect(page.locator("#redrive-policy")).to_contain_text("clicked-dlq")
    source = console_sqs.get_queue_url(QueueName="clicked-source")["QueueUrl"]
    for i in range(3):
        console_sqs.send_message(QueueUrl=source, MessageBody=f"poison {i}")
    for _ in range(20):  # a message's second receive moves it to the dead-letter queue instead
        if not console_sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages"):
            break
    _open(page, console_server)
    expect(page.locator("tr[data-queue=clicked-dlq]")).to_contain_text("DLQ of clicked-source")
    expect(page.locator("tr[data-queue=clicked-source]")).to_contain_text("→ clicked-dlq")
    page.locator("tr[data-queue=clicked-dlq]").get_by_role("link", name="clicked-dlq").click()
    expect(_visible(page)).to_have_text("3")
    expect(page.locator("table.messages td.body")).to_have_count(3)

    page.get_by_role("button", name="Redrive to source queue").click()
    expect(page.locator(".notice")).to_contain_text("Redrive started")
    task = page.locator("table.tasks tbody tr").first
    expect(task.locator(".status")).to_have_text("COMPLETED")
    expect(task.locator(".moved")).to_have_text("3")
    expect(_visible(page)).to_have_text("0")
    _open(page, console_server, "/console/queues/us-east-1/clicked-source")
    expect(_visible(page)).to_have_text("3")
    expect(page.locator("table.messages td.body")).to_have_text([f"poison {i}" for i in range(3)])


def test_the_overview_filters_sorts_and_deletes_a_queue_after_confirmation(
        page: Any, console_server: Any, console_sqs: Any) -> None:
    for name in ("sorted-b", "sorted-a", "sorted-c"):
        console_sqs.create_queue(QueueName=name)
    _open(page, console_server, "/console?prefix=sorted-")
    names = page.locator("tbody tr[data-queue]")
    expect(names).to_have_count(3)
    assert [n.get_attribute("data-queue") for n in names.all()] == ["sorted-a", "sorted-b", "sorted-c"]
    page.get_by_role("link", name=re.compile("^Name")).click()
    expect(names.first).to_have_attribute("data-queue", "sorted-c")

    page.locator("tr[data-queue=sorted-b]").get_by_role("link", name="sorted-b").click()
    page.on("dialog", lambda dialog: dialog.accept())
    delete = page.locator("form[action$='/delete']")
    delete.locator("input[name=confirm]").fill("sorted-b")
    delete.get_by_role("button", name="Delete queue").click()
    expect(page.locator(".notice")).to_have_text("Queue sorted-b deleted.")
    expect(page.locator("tr[data-queue=sorted-b]")).to_have_count(0)
    expect(page.locator("tr[data-queue=sorted-a], tr[data-queue=sorted-c]")).to_have_count(2)
    assert not [u for u in console_sqs.list_queues(QueueNamePrefix="sorted-b").get("QueueUrls", [])]


def test_the_server_page_shows_the_database_and_its_health(page: Any, console_server: Any) -> None:
    _open(page, console_server, "/console/server")
    facts = page.locator("table.facts")
    expect(facts).to_contain_text("queueserver.db")
    expect(facts).to_contain_text("healthy")
    expect(facts).to_contain_text("WAL size")


def test_a_slow_redrive_shows_its_progress_and_is_cancelled(page: Any, console_server: Any, console_sqs: Any) -> None:
    console_sqs.create_queue(QueueName="slow-dlq")
    source = console_sqs.create_queue(QueueName="slow-source", Attributes={"RedrivePolicy":
        '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:slow-dlq", "maxReceiveCount": "1"}'})["QueueUrl"]
    for start in range(0, 40, 10):
        console_sqs.send_message_batch(QueueUrl=source, Entries=[
            {"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, start + 10)])
    for _ in range(20):  # a message's second receive moves it to the dead-letter queue instead
        if not console_sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages"):
            break
    _open(page, console_server, "/console/queues/us-east-1/slow-dlq")
    expect(_visible(page)).to_have_text("40")
    page.locator("form.redrive-start input[name=rate]").fill("1")
    page.get_by_role("button", name="Redrive to source queue").click()
    task = page.locator("table.tasks tbody tr").first
    expect(task.locator(".status")).to_have_text("RUNNING")
    task.get_by_role("button", name="Cancel").click()
    expect(page.locator(".notice")).to_have_text("Redrive cancelled.")
    expect(task.locator(".status")).to_have_text(re.compile("CANCELL(ING|ED)"))
    assert int(task.locator(".moved").inner_text()) < 40


@pytest.mark.parametrize("rate", ["501", "²"])  # "²": a digit to str.isdigit, not to int()
def test_a_rate_sqs_refuses_is_answered_with_sqs_error(page: Any, console_server: Any, console_sqs: Any,
                                                       rate: str) -> None:
    console_sqs.create_queue(QueueName="rate-dlq")
    console_sqs.create_queue(QueueName="rate-source", Attributes={"RedrivePolicy":
        '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:rate-dlq", "maxReceiveCount": "1"}'})
    _open(page, console_server, "/console/queues/us-east-1/rate-dlq")
    page.locator("form.redrive-start input[name=rate]").evaluate(
        "input => { input.removeAttribute('max'); input.type = 'text' }")
    page.locator("form.redrive-start input[name=rate]").fill(rate)
    page.get_by_role("button", name="Redrive to source queue").click()
    expect(page.locator(".error")).to_contain_text("InvalidParameterValue")
    expect(page.locator("table.tasks")).to_have_count(0)


def test_a_queue_created_in_the_console_serves_both_wire_protocols(
        page: Any, console_server: Any, make_client: Any) -> None:
    name = f"both-{uuid.uuid4().hex[:8]}"
    _create(page, console_server, name)
    send_from_page(page, "from the console")
    sqs = make_client(console_server.endpoint)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    assert [m["Body"] for m in received] == ["from the console"]
    sqs.delete_queue(QueueUrl=url)
