"""Take the README's console screenshots (docs/console-*.png, 1280x800) from a freshly filled server.

Run: .venv/bin/python scripts/console_screenshots.py   (needs Debian's chromium at /usr/bin/chromium)
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import boto3
from botocore.config import Config
from playwright.sync_api import sync_playwright

from queueserver.testing import QueueServer
from queueserver.testing.chromium import CHROMIUM, CHROMIUM_ARGS

REPO_ROOT = Path(__file__).resolve().parents[1]


def subscribe(endpoint: str, queue_url: str, name: str) -> None:
    """QueueserverCreateSubscription (boto3 does not know the extension actions)."""
    request = urllib.request.Request(endpoint + "/", data=json.dumps({"QueueUrl": queue_url, "SubscriptionName": name})
                                     .encode(), headers={"X-Amz-Target": "AmazonSQS.QueueserverCreateSubscription",
                                                         "Content-Type": "application/x-amz-json-1.0"})
    with urllib.request.urlopen(request, timeout=10):
        pass


def fill(endpoint: str) -> None:
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x",
                       aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))
    sqs.create_queue(QueueName="orders-dlq")["QueueUrl"]
    dlq_arn = "arn:aws:sqs:us-east-1:000000000000:orders-dlq"
    orders = sqs.create_queue(QueueName="orders", Attributes={
        "RedrivePolicy": f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"1"}}'},
        tags={"team": "checkout"})["QueueUrl"]
    payments = sqs.create_queue(QueueName="payments.fifo", Attributes={"FifoQueue": "true",
                                                                          "ContentBasedDeduplication": "true"})["QueueUrl"]
    emails = sqs.create_queue(QueueName="emails")["QueueUrl"]
    west = boto3.client("sqs", endpoint_url=endpoint, region_name="eu-west-1", aws_access_key_id="x",
                        aws_secret_access_key="x").create_queue(QueueName="audit")["QueueUrl"]
    for name in ("billing", "shipping"):  # subscriptions, listed under their queue
        subscribe(endpoint, orders, name)
    for i in range(40):
        sqs.send_message(QueueUrl=orders, MessageBody=f'{{"order": {1000 + i}, "items": {i % 4 + 1}}}',
                         MessageAttributes={"source": {"DataType": "String", "StringValue": "web"}})
    sqs.send_message(QueueUrl=orders, MessageBody='<script>alert("shown as text")</script>')
    for i in range(12):
        sqs.send_message(QueueUrl=payments, MessageBody=f"payment {i}", MessageGroupId=f"customer-{i % 3}")
    for i in range(7):
        sqs.send_message(QueueUrl=emails, MessageBody=f"welcome mail {i}", MessageGroupId=f"tenant-{i % 2}")
    boto3.client("sqs", endpoint_url=endpoint, region_name="eu-west-1", aws_access_key_id="x",
                 aws_secret_access_key="x").send_message(QueueUrl=west, MessageBody="login")
    sqs.receive_message(QueueUrl=orders, MaxNumberOfMessages=10, VisibilityTimeout=0)
    sqs.receive_message(QueueUrl=orders, MaxNumberOfMessages=10, VisibilityTimeout=0)  # 10 to the DLQ
    sqs.receive_message(QueueUrl=orders, MaxNumberOfMessages=5, VisibilityTimeout=300)
    sqs.receive_message(QueueUrl=payments, MaxNumberOfMessages=3, VisibilityTimeout=300)


def main() -> None:
    with QueueServer(test_clock=False) as server:
        fill(server.endpoint)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(server.endpoint + "/console")
            page.wait_for_timeout(2500)  # the counts cache's staleness bound
            page.reload()
            page.screenshot(path=str(REPO_ROOT / "docs/console-overview.png"))
            page.goto(server.endpoint + "/console/queues/us-east-1/000000000000/orders")
            page.screenshot(path=str(REPO_ROOT / "docs/console-queue.png"))
            browser.close()


if __name__ == "__main__":
    main()
