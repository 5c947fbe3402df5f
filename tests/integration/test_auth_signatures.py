"""SigV4 verification with credentials on: botocore's real signatures over both protocols.

The right key works; a wrong secret, an unknown key, no signature, a changed body, an expired
presigned URL and a skewed clock each get AWS's error, and change nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from support.auth import (
    OWNER_ACCOUNT,
    SignedClock,
    json_request,
    presign,
    send,
    sign,
    signed_client,
    write_credentials,
)
from botocore import UNSIGNED
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError
from support.server import start
from support.sqs import visible

def refused(call: Any, code: str, status: int) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, status)
    return str(error["Error"]["Message"])


def test_the_right_key_works_and_its_account_is_in_queue_urls_and_arns(alice, alice_queue_url):
    assert alice_queue_url.endswith(f"/{OWNER_ACCOUNT}/{alice_queue_url.rsplit('/', 1)[1]}")
    alice.send_message(QueueUrl=alice_queue_url, MessageBody="signed")
    assert alice.receive_message(QueueUrl=alice_queue_url)["Messages"][0]["Body"] == "signed"
    arn = alice.get_queue_attributes(QueueUrl=alice_queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn == f"arn:aws:sqs:us-east-1:{OWNER_ACCOUNT}:{alice_queue_url.rsplit('/', 1)[1]}"


def test_the_region_of_the_credential_scope_chooses_the_region(auth_server, protocol):
    west = signed_client(protocol, auth_server.endpoint, "AKIDALICE", region="eu-west-1")
    url = west.create_queue(QueueName=f"regional-{protocol}")["QueueUrl"]
    arn = west.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn.startswith("arn:aws:sqs:eu-west-1:")
    east = signed_client(protocol, auth_server.endpoint, "AKIDALICE")
    assert url not in east.list_queues(QueueNamePrefix="regional-").get("QueueUrls", [])


def test_a_wrong_secret_is_signature_does_not_match_and_sends_nothing(auth_server, protocol, alice, alice_queue_url):
    forger = signed_client(protocol, auth_server.endpoint, "AKIDALICE", secret="not-alices-secret")
    message = refused(lambda: forger.send_message(QueueUrl=alice_queue_url, MessageBody="forged"),
                      "SignatureDoesNotMatch", 403)
    assert message.startswith("The request signature we calculated does not match the signature you provided.")
    assert visible(alice, alice_queue_url) == 0


def test_an_unknown_key_is_invalid_client_token_id_and_creates_nothing(auth_server, protocol, alice):
    stranger = signed_client(protocol, auth_server.endpoint, "AKIDNOBODY", secret="whatever")
    message = refused(lambda: stranger.create_queue(QueueName="never-created"), "InvalidClientTokenId", 403)
    assert message == "The security token included in the request is invalid."
    assert not any(url.endswith("/never-created") for url in alice.list_queues().get("QueueUrls", []))


def test_an_unsigned_request_is_missing_authentication_token_and_purges_nothing(auth_server, protocol, alice,
                                                                                alice_queue_url):
    alice.send_message(QueueUrl=alice_queue_url, MessageBody="stays")
    anonymous = signed_client(protocol, auth_server.endpoint, "AKIDALICE", signature_version=UNSIGNED)
    refused(lambda: anonymous.purge_queue(QueueUrl=alice_queue_url), "MissingAuthenticationToken", 403)
    assert visible(alice, alice_queue_url) == 1


def test_a_body_changed_after_signing_is_refused_and_sends_nothing(auth_server, protocol, alice, alice_queue_url):
    if protocol == "json":
        request = sign(json_request(auth_server.endpoint, "SendMessage",
                                    {"QueueUrl": alice_queue_url, "MessageBody": "signed"}), "AKIDALICE")
        tampered = request.body.replace(b"signed", b"evil!!")
    else:
        form = {"Action": "SendMessage", "Version": "2012-11-05", "QueueUrl": alice_queue_url, "MessageBody": "signed"}
        request = sign(AWSRequest(method="POST", url=auth_server.endpoint + "/", data=urlencode(form).encode(),
                                  headers={"Content-Type": "application/x-www-form-urlencoded"}), "AKIDALICE")
        tampered = request.body.replace(b"signed", b"evil!!")
    assert len(tampered) == len(request.body) and tampered != request.body
    status, headers, _ = send(request, body=tampered)
    assert (status, headers["x-amzn-query-error"]) == (403, "SignatureDoesNotMatch;Sender")
    assert visible(alice, alice_queue_url) == 0
    status, _, _ = send(request)  # the same request untouched is accepted: the body was the only change
    assert status == 200
    assert visible(alice, alice_queue_url) == 1


def test_a_presigned_url_works_until_it_expires_then_is_request_expired(auth_server, alice, alice_queue_url):
    clock = SignedClock(auth_server.endpoint)
    query = urlencode({"Action": "SendMessage", "Version": "2012-11-05", "QueueUrl": alice_queue_url,
                       "MessageBody": "presigned"})
    lifetime = math.ceil(clock.ahead_s()) + 60
    url = presign(f"{auth_server.endpoint}/?{query}", "AKIDALICE", expires=lifetime)
    status, _, body = send(AWSRequest(method="GET", url=url))
    assert status == 200, body
    assert visible(alice, alice_queue_url) == 1
    clock.advance(61)  # past the URL's X-Amz-Date + X-Amz-Expires on the server's clock
    status, headers, body = send(AWSRequest(method="GET", url=url))
    assert (status, headers["x-amzn-query-error"]) == (400, "RequestExpired;Sender")
    assert b"<Code>RequestExpired</Code>" in body
    assert visible(alice, alice_queue_url) == 1


@pytest.mark.parametrize("tamper", ["month13", "newline"])
def test_a_presigned_date_that_is_no_real_moment_is_an_incomplete_signature(
        auth_server, alice, alice_queue_url, tamper):
    query = urlencode({"Action": "SendMessage", "Version": "2012-11-05", "QueueUrl": alice_queue_url,
                       "MessageBody": "bad date"})
    parts = urlsplit(presign(f"{auth_server.endpoint}/?{query}", "AKIDALICE", expires=300))
    fields = dict(parse_qsl(parts.query))
    date = fields["X-Amz-Date"]
    if tamper == "month13":  # 13th month, with the credential scope's day to match
        fields["X-Amz-Date"] = date[:4] + "13" + date[6:]
        fields["X-Amz-Credential"] = fields["X-Amz-Credential"].replace(f"/{date[:8]}/", f"/{date[:4]}13{date[6:8]}/")
    else:
        fields["X-Amz-Date"] = date + "\n"
    status, headers, body = send(AWSRequest(method="GET", url=f"{auth_server.endpoint}/?{urlencode(fields)}"))
    assert (status, headers["x-amzn-query-error"]) == (400, "IncompleteSignature;Sender"), body
    assert b"X-Amz-Date must be in the ISO8601 Long Format" in body
    assert visible(alice, alice_queue_url) == 0


def test_a_presigned_json_request_is_verified_with_the_body_hash_it_signed(auth_server, alice):
    request = json_request(auth_server.endpoint, "ListQueues", {})
    headers = {**dict(request.headers.items()), "X-Amz-Content-SHA256": hashlib.sha256(request.body).hexdigest()}
    url = presign(auth_server.endpoint + "/", "AKIDALICE", expires=3600, method="POST", headers=headers)
    status, _, answer = send(AWSRequest(method="POST", url=url, data=request.body, headers=headers))
    assert status == 200, answer
    assert json.loads(answer)["QueueUrls"] == alice.list_queues()["QueueUrls"]
    status, headers_back, _ = send(AWSRequest(method="POST", url=url, data=b'{"MaxResults": 1}', headers=headers))
    assert (status, headers_back["x-amzn-query-error"]) == (403, "SignatureDoesNotMatch;Sender")


def test_a_session_token_is_refused_as_an_invalid_token(auth_server, protocol):
    client = signed_client(protocol, auth_server.endpoint, "AKIDALICE", token="a-session-token")
    refused(lambda: client.list_queues(), "InvalidClientTokenId", 403)


def test_a_clock_skewed_past_five_minutes_is_signature_does_not_match(tmp_path, protocol):
    server = start(tmp_path / "skew.db", "--test-clock", "--credentials", str(write_credentials(tmp_path / "k.toml")))
    try:
        alice = signed_client(protocol, server.endpoint, "AKIDALICE")
        url = alice.create_queue(QueueName="skewed")["QueueUrl"]
        SignedClock(server.endpoint).advance(4 * 60)
        alice.send_message(QueueUrl=url, MessageBody="within the window")
        SignedClock(server.endpoint).advance(2 * 60)  # the server is now 6 minutes ahead of the signer
        message = refused(lambda: alice.send_message(QueueUrl=url, MessageBody="too old"),
                          "SignatureDoesNotMatch", 403)
        assert message.startswith("Signature expired: ") and message.endswith(" - 5 min.)")
        assert server.running
    finally:
        assert server.stop() == 0


def _signed_list_queues(auth_server: Server, protocol: str, headers: dict[str, str]) -> AWSRequest:
    """A ListQueues of `protocol` signed by botocore with these extra headers (signed too)."""
    if protocol == "json":
        request = json_request(auth_server.endpoint, "ListQueues", {})
    else:
        request = AWSRequest(method="POST", url=auth_server.endpoint + "/",
                             data=urlencode({"Action": "ListQueues", "Version": "2012-11-05"}).encode(),
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
    for name, value in headers.items():
        request.headers[name] = value
    return sign(request, "AKIDALICE")


def test_a_signed_header_with_runs_of_spaces_is_verified_as_aws_trims_it_and_a_changed_one_is_refused(
        auth_server, protocol):
    request = _signed_list_queues(auth_server, protocol, {"X-Amz-Meta-Note": "two  spaces\tand a  tab"})
    assert "x-amz-meta-note" in request.headers["Authorization"]  # botocore signed it, its runs made one space
    status, _, body = send(request)
    assert status == 200, body
    del request.headers["X-Amz-Meta-Note"]
    request.headers["X-Amz-Meta-Note"] = "two  spaces\tand a  TAB"
    status, headers, _ = send(request)
    assert (status, headers["x-amzn-query-error"]) == (403, "SignatureDoesNotMatch;Sender")


@pytest.mark.parametrize("drop", ["Credential", "SignedHeaders", "Signature"])
def test_an_authorization_header_without_one_of_its_parts_is_incomplete_signature(auth_server, protocol, drop):
    request = _signed_list_queues(auth_server, protocol, {})
    algorithm, _, parts = request.headers["Authorization"].partition(" ")
    kept = ", ".join(part for part in parts.split(", ") if not part.startswith(drop + "="))
    del request.headers["Authorization"]
    request.headers["Authorization"] = f"{algorithm} {kept}"
    status, headers, body = send(request)
    assert (status, headers["x-amzn-query-error"]) == (400, "IncompleteSignature;Sender")
    assert f"Authorization header requires '{drop}' parameter.".encode() in body
