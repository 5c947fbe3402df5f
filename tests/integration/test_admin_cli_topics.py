"""The admin CLI's topic commands (`queueserver topics`, `queueserver publish`) against a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import boto3
import pytest
from support.server import REPO_ROOT
from support.sqs import unique_queue_name

pytestmark = pytest.mark.server_process


def cli(server: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run([sys.executable, "-m", "queueserver", *args, "--endpoint", server.endpoint],
                          cwd=REPO_ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=60, check=False)


def test_topics_lists_subscriptions_with_their_filter_and_publish_reaches_them(server: Any, sqs: Any) -> None:
    name = unique_queue_name("cli-topic")[:60]
    sns = boto3.client("sns", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="test",
                       aws_secret_access_key="test")
    topic = sns.create_topic(Name=name)["TopicArn"]
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:000000000000:{name}",
                  Attributes={"RawMessageDelivery": "true", "FilterPolicy": '{"kind": ["a"]}'})
    done = cli(server, "topics", "--json")
    assert done.returncode == 0, done.stderr
    [listed] = [t for t in json.loads(done.stdout) if t["topic"] == topic]
    [subscription] = listed["subscriptions"]
    assert (subscription["endpoint"], subscription["raw"], subscription["filter_policy"]) == (
        f"arn:aws:sqs:us-east-1:000000000000:{name}", "true", '{"kind": ["a"]}')
    assert name in cli(server, "topics").stdout
    published = cli(server, "publish", name, "hello", "--attribute", "kind=a", "--json")
    assert published.returncode == 0, published.stderr
    assert len(json.loads(published.stdout)["MessageId"]) == 36
    assert cli(server, "publish", topic, "--attribute", "kind=b", stdin="filtered").returncode == 0
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    assert bodies == ["hello"]
    missing = cli(server, "publish", name + "-none", "x")
    assert missing.returncode == 4 and "no topic named" in missing.stderr
