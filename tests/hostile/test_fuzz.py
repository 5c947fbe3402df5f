"""Fuzzing both wire protocols against a real server process: whatever arrives, the
answer is never a 5xx, the server never dies, and it still answers afterwards.

Bounded for CI: 500 examples a protocol, derandomised so that a CI failure reproduces (about
8 s for both here). QUEUESERVER_FUZZ_EXAMPLES=N runs N random examples a protocol instead.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.sqs import unique_queue_name
from support.wire import raw_json_call, raw_request

pytestmark = pytest.mark.server_process

FUZZ_EXAMPLES = int(os.environ.get("QUEUESERVER_FUZZ_EXAMPLES", "500"))
LONG_RUN = "QUEUESERVER_FUZZ_EXAMPLES" in os.environ  # random, not derandomised: new examples each run
ACTIONS = ["CreateQueue", "GetQueueUrl", "ListQueues", "DeleteQueue", "GetQueueAttributes", "SetQueueAttributes",
           "PurgeQueue", "TagQueue", "UntagQueue", "ListQueueTags", "AddPermission", "RemovePermission",
           "SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch",
           "ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "ListDeadLetterSourceQueues",
           "StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask"]
MEMBERS = ["QueueName", "QueueUrl", "Attributes", "tags", "Tags", "TagKeys", "AttributeNames", "MessageBody",
           "MessageAttributes", "MessageSystemAttributes", "DelaySeconds", "MessageGroupId",
           "MessageDeduplicationId", "Entries", "Id", "ReceiptHandle", "VisibilityTimeout", "MaxNumberOfMessages",
           "WaitTimeSeconds", "Label", "AWSAccountIds", "Actions", "DataType", "StringValue", "BinaryValue",
           "MaxResults", "NextToken", "QueueNamePrefix", "SourceArn", "TaskHandle", "Policy", "RedrivePolicy",
           "FifoQueue", "KmsMasterKeyId", "MessageRetentionPeriod"]
QUERY_HEADS = ["Attribute", "Tag", "MessageAttribute", "MessageSystemAttribute", "AttributeName", "TagKey",
               "AWSAccountId", "ActionName", "SendMessageBatchRequestEntry", "DeleteMessageBatchRequestEntry",
               "ChangeMessageVisibilityBatchRequestEntry", "Entries"]
QUERY_TAILS = ["Name", "Value", "Key", "Id", "MessageBody", "Value.DataType", "Value.StringValue",
               "Value.BinaryValue", "ReceiptHandle", "VisibilityTimeout", "DelaySeconds", ""]

_SETTINGS = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=not LONG_RUN, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                            HealthCheck.data_too_large])

# text with everything: lone surrogates, control characters, non-characters, astral planes
_text = st.text(st.characters(codec=None), max_size=40)
_numbers = st.one_of(st.integers(min_value=-(10**30), max_value=10**30), st.floats(allow_nan=True),
                     st.sampled_from(["1e999999999999", "9" * 5000, "-0", "NaN", "Infinity", " 7 "]))


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from support.server import start_server

    db = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    proc = start_server(db, "--test-clock")
    urls = []
    for name, attributes in ((unique_queue_name("fz"), {}), (unique_queue_name("fz") + ".fifo", {"FifoQueue": True})):
        response = raw_json_call(proc.endpoint, "CreateQueue", {"QueueName": name, "Attributes": {
            k: str(v).lower() for k, v in attributes.items()}}, sign=False)
        assert response.status == 200, response.body
        urls.append(response.json()["QueueUrl"])
    yield proc, urls
    alive = proc.running
    log = proc.stderr_text()
    proc.stop()
    assert alive, log
    assert "Traceback" not in log, log[-5000:]


def _json_values(urls: list[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), _numbers, _text, st.sampled_from(urls))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(MEMBERS), _text), inner, max_size=4)), max_leaves=12)


def _query_name() -> st.SearchStrategy[str]:
    index = st.one_of(st.integers(0, 12).map(str), st.sampled_from(["", "x", "01", "9" * 30, "-1"]))
    return st.one_of(st.sampled_from(MEMBERS),
                     st.builds(lambda h, i, t: ".".join(p for p in (h, i, t) if p),
                               st.sampled_from(QUERY_HEADS), index, st.sampled_from(QUERY_TAILS)),
                     _text)


def _quote(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _assert_answered(response: Any) -> None:
    assert response.status < 500, (response.status, response.body[:500])
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/plain"):  # refused before parsing: a control character in a header, a long URL
        assert response.status in (400, 431), response.body[:300]
    elif content_type.startswith("application/x-amz-json"):
        json.loads(response.body)
    else:
        assert re.match(rb"<\?xml version=\"1.0\" encoding=\"UTF-8\"\?>\n<", response.body), response.body[:300]
        response.body.decode("utf-8")  # an XML answer is always valid UTF-8


@st.composite
def json_requests(draw: st.DrawFn, urls: list[str]) -> tuple[str, bytes]:
    action = draw(st.one_of(st.sampled_from(ACTIONS), _text))
    if draw(st.integers(0, 9)) == 0:
        return action, draw(st.binary(max_size=200))
    payload = draw(st.dictionaries(st.sampled_from(MEMBERS), _json_values(urls), max_size=6))
    return action, json.dumps(payload).encode()


@st.composite
def query_requests(draw: st.DrawFn, urls: list[str]) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    fields = [("Action", draw(st.one_of(st.sampled_from(ACTIONS), _text)))]
    fields += draw(st.lists(st.tuples(_query_name(), st.one_of(_text, st.sampled_from(urls), _numbers.map(str))),
                            max_size=8))
    return "&".join(f"{_quote(name)}={_quote(value)}" for name, value in fields).encode()


def test_fuzzed_json_requests_never_get_a_5xx(fuzzed):
    server, urls = fuzzed
    examples = []

    @_SETTINGS
    @given(json_requests(urls))
    def run(request: tuple[str, bytes]) -> None:
        examples.append(1)
        action, body = request
        target = f"AmazonSQS.{action}".encode("utf-8", "surrogatepass").decode("latin-1", "replace")
        target = target.encode("latin-1", "replace").decode("latin-1").replace("\r", " ").replace("\n", " ")
        _assert_answered(raw_request(server.endpoint, body, target=target, sign=False))

    run()
    assert len(examples) >= FUZZ_EXAMPLES
    assert raw_json_call(server.endpoint, "ListQueues", {}, sign=False).status == 200


def test_fuzzed_query_requests_never_get_a_5xx(fuzzed):
    server, urls = fuzzed
    examples = []

    @_SETTINGS
    @given(query_requests(urls), st.sampled_from(["POST", "GET"]))
    def run(body: bytes, method: str) -> None:
        examples.append(1)
        if method == "GET":
            path = "/?" + quote(body, safe="=&%+")  # a URL carries no raw control bytes
            response = raw_request(server.endpoint, b"", method="GET", path=path, sign=False,
                                   content_type="application/x-www-form-urlencoded")
        else:
            response = raw_request(server.endpoint, body, content_type="application/x-www-form-urlencoded",
                                   sign=False)
        _assert_answered(response)

    run()
    assert len(examples) >= FUZZ_EXAMPLES
    assert raw_json_call(server.endpoint, "ListQueues", {}, sign=False).status == 200
