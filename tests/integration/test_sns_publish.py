"""Publish and PublishBatch into subscribed queues (boto3's `sns` and `sqs` clients on one server): the
envelope as AWS writes it and signs it, raw delivery, FIFO topics, filter policies, and the errors."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import urllib.request
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from support.sqs import unique_queue_name


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return unique_queue_name(request.node.originalname.removeprefix("test_"))[:60]


class Wiring:
    """A topic and queues subscribed to it."""

    def __init__(self, sns: Any, sqs: Any, name: str, fifo: bool = False, **topic_attributes: str) -> None:
        self.sns, self.sqs, self.name, self.fifo = sns, sqs, name, fifo
        attributes = {"FifoTopic": "true", **topic_attributes} if fifo else topic_attributes
        self.topic = sns.create_topic(Name=name + (".fifo" if fifo else ""), Attributes=attributes)["TopicArn"]

    def queue(self, suffix: str, fifo: bool | None = None, **subscription: str) -> tuple[str, str]:
        """(queue URL, subscription ARN) of a new queue subscribed with these attributes."""
        fifo = self.fifo if fifo is None else fifo
        url = self.sqs.create_queue(QueueName=f"{self.name}-{suffix}" + (".fifo" if fifo else ""),
                                    Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sub = self.sns.subscribe(TopicArn=self.topic, Protocol="sqs", Endpoint=arn, Attributes=subscription,
                                 ReturnSubscriptionArn=True)["SubscriptionArn"]
        return url, sub

    def received(self, url: str, count: int = 10) -> list[dict[str, Any]]:
        return self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count, MessageAttributeNames=["All"],
                                        AttributeNames=["All"]).get("Messages", [])


def test_a_publish_is_in_every_subscribed_queue_in_aws_envelope_signed_with_the_served_certificate(
        sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    first, sub = wiring.queue("a")
    second, _ = wiring.queue("b")
    answer = sns.publish(TopicArn=wiring.topic, Message="hello", Subject="greeting",
                         MessageAttributes={"kind": {"DataType": "String", "StringValue": "order"},
                                            "blob": {"DataType": "Binary", "BinaryValue": b"\x02\x03\x04"}})
    [a] = wiring.received(first)
    [b] = wiring.received(second)
    assert json.loads(b["Body"])["MessageId"] == answer["MessageId"]
    envelope = json.loads(a["Body"])
    assert list(envelope) == ["Type", "MessageId", "TopicArn", "Subject", "Message", "Timestamp", "SignatureVersion",
                              "Signature", "SigningCertURL", "UnsubscribeURL", "MessageAttributes"]
    assert (envelope["Type"], envelope["MessageId"], envelope["TopicArn"]) == (
        "Notification", answer["MessageId"], wiring.topic)
    assert (envelope["Subject"], envelope["Message"], envelope["SignatureVersion"]) == ("greeting", "hello", "1")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", envelope["Timestamp"])
    assert envelope["MessageAttributes"] == {"kind": {"Type": "String", "Value": "order"},
                                             "blob": {"Type": "Binary", "Value": "AgME"}}
    assert envelope["UnsubscribeURL"].endswith(f"/?Action=Unsubscribe&SubscriptionArn={sub}")
    assert "MessageAttributes" not in a  # a non-raw delivery carries its attributes in the envelope alone
    signed = "".join(f"{k}\n{envelope[k]}\n" for k in ("Message", "MessageId", "Subject", "Timestamp", "TopicArn",
                                                        "Type"))
    with urllib.request.urlopen(envelope["SigningCertURL"]) as response:
        certificate = x509.load_pem_x509_certificate(response.read())
    certificate.public_key().verify(base64.b64decode(envelope["Signature"]), signed.encode(),  # type: ignore[call-arg]
                                    padding.PKCS1v15(), hashes.SHA1())  # type: ignore[call-arg]


def test_signature_version_2_signs_with_sha256(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name, SignatureVersion="2")
    url, _ = wiring.queue("a")
    sns.publish(TopicArn=wiring.topic, Message="two")
    envelope = json.loads(wiring.received(url)[0]["Body"])
    assert envelope["SignatureVersion"] == "2" and "Subject" not in envelope
    signed = "".join(f"{k}\n{envelope[k]}\n" for k in ("Message", "MessageId", "Timestamp", "TopicArn", "Type"))
    with urllib.request.urlopen(envelope["SigningCertURL"]) as response:
        certificate = x509.load_pem_x509_certificate(response.read())
    certificate.public_key().verify(base64.b64decode(envelope["Signature"]), signed.encode(),  # type: ignore[call-arg]
                                    padding.PKCS1v15(), hashes.SHA256())  # type: ignore[call-arg]


def test_raw_delivery_carries_the_message_and_its_attributes_as_sqs_attributes(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    url, _ = wiring.queue("raw", RawMessageDelivery="true")
    sns.publish(TopicArn=wiring.topic, Message="just this",
                MessageAttributes={"n": {"DataType": "Number", "StringValue": "42"},
                                   "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}})
    [message] = wiring.received(url)
    assert message["Body"] == "just this"
    assert message["MessageAttributes"] == {"n": {"DataType": "Number", "StringValue": "42"},
                                            "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}}


def test_message_structure_json_delivers_the_sqs_entry_or_the_default(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    url, _ = wiring.queue("a", RawMessageDelivery="true")
    sns.publish(TopicArn=wiring.topic, MessageStructure="json", Message=json.dumps({"default": "d", "sqs": "q"}))
    sns.publish(TopicArn=wiring.topic, MessageStructure="json", Message=json.dumps({"default": "d", "sqs": 1}))
    assert sorted(m["Body"] for m in wiring.received(url)) == ["d", "q"]
    with pytest.raises(ClientError, match="No default entry in JSON message body"):
        sns.publish(TopicArn=wiring.topic, MessageStructure="json", Message=json.dumps({"sqs": "q"}))
    with pytest.raises(ClientError, match="JSON message body failed to parse"):
        sns.publish(TopicArn=wiring.topic, MessageStructure="json", Message="{")


def test_a_fifo_topic_delivers_in_order_with_its_group_deduplicates_and_numbers(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name, fifo=True, ContentBasedDeduplication="true")
    fifo_url, _ = wiring.queue("f")
    standard_url, _ = wiring.queue("s", fifo=False)
    first = sns.publish(TopicArn=wiring.topic, Message="Test", MessageGroupId="g")
    again = sns.publish(TopicArn=wiring.topic, Message="Test", MessageGroupId="g")
    second = sns.publish(TopicArn=wiring.topic, Message="next", MessageGroupId="g")
    assert again["MessageId"] == first["MessageId"]
    assert int(second["SequenceNumber"]) > int(first["SequenceNumber"])
    received = wiring.received(fifo_url)
    assert [json.loads(m["Body"])["Message"] for m in received] == ["Test", "next"]
    envelope = json.loads(received[0]["Body"])
    assert list(envelope)[:3] == ["Type", "MessageId", "SequenceNumber"]
    assert "Signature" not in envelope and "SigningCertURL" not in envelope
    assert envelope["SequenceNumber"] == first["SequenceNumber"]
    assert received[0]["Attributes"]["MessageGroupId"] == "g"
    assert received[0]["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(b"Test").hexdigest()
    plain = wiring.received(standard_url)
    assert len(plain) == 2 and all("MessageGroupId" not in m["Attributes"] for m in plain)


def test_fifo_publish_needs_a_group_and_a_deduplication_id(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name, fifo=True)
    with pytest.raises(ClientError, match="The MessageGroupId parameter is required for FIFO topics"):
        sns.publish(TopicArn=wiring.topic, Message="m")
    with pytest.raises(ClientError, match="either have ContentBasedDeduplication enabled or MessageDeduplicationId"):
        sns.publish(TopicArn=wiring.topic, Message="m", MessageGroupId="g")
    standard = Wiring(sns, sqs, name + "-std")
    with pytest.raises(ClientError, match="MessageDeduplicationId parameter that is not valid for this topic type"):
        standard.sns.publish(TopicArn=standard.topic, Message="m", MessageDeduplicationId="d")


def test_a_fifo_queue_cannot_subscribe_to_a_standard_topic(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    with pytest.raises(ClientError, match="Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues"):
        wiring.queue("f", fifo=True)


def test_publish_errors_are_aws_texts(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    cases = [
        ({"Message": ""}, "InvalidParameter", "Invalid parameter: Empty message"),
        ({"Message": "m", "Subject": ""}, "InvalidParameter", "Invalid parameter: Subject"),
        ({"Message": "x" * 262_145}, "InvalidParameter", "Invalid parameter: Message too long"),
        ({"Message": "m", "MessageAttributes": {"a": {"DataType": "String", "StringValue": ""}}},
         "ParameterValueInvalid", "The message attribute 'a' must contain non-empty message attribute value for "
                                  "message attribute type 'String'."),
        ({"Message": "m", "MessageAttributes": {"a": {"DataType": "String.", "StringValue": "v"}}},
         "ParameterValueInvalid", "The message attribute 'a' has an invalid message attribute type, the set of "
                                  "supported type prefixes is Binary, Number, and String."),
        ({"Message": "m", "MessageAttributes": {"a^": {"DataType": "String", "StringValue": "v"}}},
         "ParameterValueInvalid", "Invalid non-alphanumeric character '#x5E' was found in the message attribute "
                                  "name. Can only include alphanumeric characters, hyphens, underscores, or dots."),
    ]
    for members, code, message in cases:
        with pytest.raises(ClientError) as caught:
            sns.publish(TopicArn=wiring.topic, **members)
        assert (caught.value.response["Error"]["Code"], caught.value.response["Error"]["Message"]) == (code, message)
    assert len(sns.publish(TopicArn=wiring.topic, Message="x" * 262_144)["MessageId"]) == 36


def test_publish_batch_stores_every_entry_and_answers_each(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    url, _ = wiring.queue("a", RawMessageDelivery="true")
    answer = sns.publish_batch(TopicArn=wiring.topic, PublishBatchRequestEntries=[
        {"Id": f"e{i}", "Message": f"m{i}",
         "MessageAttributes": {"i": {"DataType": "Number", "StringValue": str(i)}}} for i in range(10)])
    assert [s["Id"] for s in answer["Successful"]] == [f"e{i}" for i in range(10)]
    assert answer["Failed"] == []
    bodies = [m["Body"] for m in wiring.received(url)] + [m["Body"] for m in wiring.received(url)]
    assert sorted(bodies) == [f"m{i}" for i in range(10)]


@pytest.mark.parametrize("entries, code", [
    ([], "EmptyBatchRequest"),
    ([{"Id": str(i), "Message": "m"} for i in range(11)], "TooManyEntriesInBatchRequest"),
    ([{"Id": "a", "Message": "m"}, {"Id": "a", "Message": "m"}], "BatchEntryIdsNotDistinct"),
    ([{"Id": "a b", "Message": "m"}], "InvalidBatchEntryId"),
    ([{"Id": "a", "Message": "m"}, {"Id": "b", "Message": ""}], "InvalidParameter"),
    ([{"Id": str(i), "Message": "x" * 30_000} for i in range(10)], "BatchRequestTooLong"),
])
def test_a_bad_batch_fails_whole_and_stores_nothing(sns: Any, sqs: Any, name: str, entries: list[Any],
                                                    code: str) -> None:
    wiring = Wiring(sns, sqs, name)
    url, _ = wiring.queue("a")
    unvalidated = boto3.client("sns", endpoint_url=sns.meta.endpoint_url, region_name="us-east-1",
                               aws_access_key_id="test", aws_secret_access_key="test",
                               config=boto3.session.Config(parameter_validation=False))
    with pytest.raises(ClientError) as caught:
        unvalidated.publish_batch(TopicArn=wiring.topic, PublishBatchRequestEntries=entries)
    assert caught.value.response["Error"]["Code"] == code
    assert wiring.received(url) == []


def test_an_unsupported_protocol_is_refused_as_aws_refuses_it(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    for protocol in ("http", "https", "email", "lambda", "sms", "application", "firehose"):
        with pytest.raises(ClientError) as caught:
            sns.subscribe(TopicArn=wiring.topic, Protocol=protocol, Endpoint="x")
        assert caught.value.response["Error"]["Message"] == (
            f"Invalid parameter: Amazon SNS does not support this protocol string: {protocol}")
    with pytest.raises(ClientError, match="Invalid parameter: SQS endpoint ARN"):
        sns.subscribe(TopicArn=wiring.topic, Protocol="sqs", Endpoint="http://localhost/000000000000/q")


def test_a_subscription_to_a_missing_queue_is_accepted_and_its_deliveries_fail(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    sns.subscribe(TopicArn=wiring.topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:000000000000:{name}-none")
    assert len(sns.publish(TopicArn=wiring.topic, Message="m")["MessageId"]) == 36


def test_an_undeliverable_message_goes_to_the_subscription_dead_letter_queue(sns: Any, sqs: Any, name: str) -> None:
    wiring = Wiring(sns, sqs, name)
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=wiring.topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:000000000000:{name}-gone",
                  Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn})})
    sns.publish(TopicArn=wiring.topic, Message="to the dlq")
    [message] = wiring.received(dlq)
    assert json.loads(message["Body"])["Message"] == "to the dlq"


def test_metrics_count_published_delivered_filtered_out_failed_and_redriven_per_topic(
        tmp_path: Any, server_factory: Any, make_client: Any, name: str) -> None:
    server = server_factory(tmp_path / "metrics.db", "--test-clock")
    sns = boto3.client("sns", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="test",
                       aws_secret_access_key="test")
    sqs = make_client(server.endpoint)
    wiring = Wiring(sns, sqs, name)
    wiring.queue("all")
    wiring.queue("reds", FilterPolicy=json.dumps({"colour": ["red"]}))
    wiring.queue("bodies", FilterPolicy=json.dumps({"colour": ["red"]}), FilterPolicyScope="MessageBody")
    sns.subscribe(TopicArn=wiring.topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:000000000000:{name}-gone")
    sqs.create_queue(QueueName=f"{name}-dlq")
    sns.subscribe(TopicArn=wiring.topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:000000000000:{name}-lost",
                  Attributes={"RedrivePolicy": json.dumps(
                      {"deadLetterTargetArn": f"arn:aws:sqs:us-east-1:000000000000:{name}-dlq"})})
    sns.publish(TopicArn=wiring.topic, Message="abc",
                MessageAttributes={"colour": {"DataType": "String", "StringValue": "blue"}})
    sns.publish_batch(TopicArn=wiring.topic, PublishBatchRequestEntries=[
        {"Id": "1", "Message": '{"colour": "red"}',
         "MessageAttributes": {"colour": {"DataType": "String", "StringValue": "red"}}},
        {"Id": "2", "Message": "x"}])
    with urllib.request.urlopen(server.endpoint + "/metrics") as response:
        text = response.read().decode()
    topic = wiring.topic.rpartition(":")[2]

    def value(family: str, reason: str = "") -> float:  # the exposition writes the labels in name order
        labels = f'account="000000000000",{reason}region="us-east-1",topic="{topic}"'
        found = re.search(rf"^queueserver_topic_{family}_total{{{re.escape(labels)}}} (\S+)$", text, re.M)
        assert found is not None, family
        return float(found.group(1))

    # 3 publications x 5 subscriptions: "all" takes 3, "reds" 1 and "bodies" 1; "gone" fails 3 times;
    # "lost" fails 3 times and its dead-letter queue takes each.
    assert {f: value(f) for f in ("messages_published", "notifications_delivered", "notifications_filtered_out",
                                  "notifications_failed", "notifications_redriven_to_dlq",
                                  "notifications_failed_to_redrive_to_dlq")} == {
        "messages_published": 3, "notifications_delivered": 5, "notifications_filtered_out": 4,
        "notifications_failed": 6, "notifications_redriven_to_dlq": 3, "notifications_failed_to_redrive_to_dlq": 0}
    assert {r: value("notifications_filtered_out_by_reason", f'reason="{r}",') for r in (
        "MessageAttributes", "MessageBody", "NoMessageAttributes", "InvalidAttributes", "InvalidMessageBody")} == {
        "MessageAttributes": 1, "MessageBody": 0, "NoMessageAttributes": 1, "InvalidAttributes": 0,
        "InvalidMessageBody": 2}


def test_a_restarted_server_shows_its_topics_in_metrics_before_any_sns_request(tmp_path: Any,
                                                                              server_factory: Any) -> None:
    db = tmp_path / "restart.db"
    first = server_factory(db, "--test-clock")
    boto3.client("sns", endpoint_url=first.endpoint, region_name="us-east-1", aws_access_key_id="test",
                 aws_secret_access_key="test").create_topic(Name="kept")
    first.stop()
    second = server_factory(db, "--test-clock")
    with urllib.request.urlopen(second.endpoint + "/metrics") as response:
        text = response.read().decode()
    assert 'queueserver_topic_messages_published_total{account="000000000000",region="us-east-1",topic="kept"} 0.0' \
        in text


def test_topics_subscriptions_and_the_signing_key_outlive_a_restart(tmp_path: Any, server_factory: Any,
                                                                    make_client: Any) -> None:
    db = tmp_path / "kept.db"
    urls = []
    for run in range(2):
        server = server_factory(db, "--test-clock")
        sns = boto3.client("sns", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="test",
                           aws_secret_access_key="test")
        sqs = make_client(server.endpoint)
        if run == 0:
            topic = sns.create_topic(Name="kept")["TopicArn"]
            sqs.create_queue(QueueName="kept-queue")
            sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint="arn:aws:sqs:us-east-1:000000000000:kept-queue")
        sns.publish(TopicArn="arn:aws:sns:us-east-1:000000000000:kept", Message=f"run {run}")
        queue = sqs.get_queue_url(QueueName="kept-queue")["QueueUrl"]
        [message] = sqs.receive_message(QueueUrl=queue)["Messages"]
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
        envelope = json.loads(message["Body"])
        assert envelope["Message"] == f"run {run}"
        urls.append(envelope["SigningCertURL"].partition("/SimpleNotificationService-")[2])
        server.stop()
    assert urls[0] == urls[1]  # the same key and certificate: a consumer that trusted one trusts the next
