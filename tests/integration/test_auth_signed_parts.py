"""What runs is what was signed: the headers that choose the protocol and the action, the host, the
query string as the Query protocol reads it, a presigned URL's expiry, the credential scope's region.

Each request is signed by botocore (covering fewer headers where the test says so) and sent to
a real server with credentials on; each refusal is checked for its code and status, and for
having changed nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
from botocore.awsrequest import AWSRequest
from support.auth import (
    json_request,
    presign,
    presign_only,
    refusal,
    send,
    sign,
    sign_only,
    signed_client,
)
from support.server import Server, run_queueserver
from support.sqs import visible
from support.wire import FORM

ALL_BUT_HOST = {"x-amz-date", "x-amz-target", "content-type"}


@pytest.fixture
def owner(auth_server: Server) -> Any:
    """Alice's JSON client, to set up and inspect (the requests under test are made by hand)."""
    return signed_client("json", auth_server.endpoint, "AKIDALICE")


@pytest.fixture
def queue(owner: Any, request: pytest.FixtureRequest) -> str:
    """An empty queue of Alice's, named after the test."""
    name = request.node.originalname.removeprefix("test_")[:50]
    if hasattr(request.node, "callspec"):
        name += "-" + re.sub(r"[^A-Za-z0-9_-]", "-", request.node.callspec.id)
    return str(owner.create_queue(QueueName=name[:80])["QueueUrl"])


def query_url(auth_server: Server, path: str, **params: str) -> str:
    return f"{auth_server.endpoint}{path}?{urlencode({**params, 'Version': '2012-11-05'}, quote_via=quote)}"


def query_post(auth_server: Server, **params: str) -> AWSRequest:
    return AWSRequest(method="POST", url=auth_server.endpoint + "/", headers={"Content-Type": FORM},
                      data=urlencode({**params, "Version": "2012-11-05"}).encode())


def queues_in_the_database(auth_folder: Path) -> str:
    """Every queue of every region and account, as `queueserver check` lists them."""
    checked = run_queueserver("check", "--db", str(auth_folder / "auth.db"))
    assert checked.returncode == 0, checked.stderr
    return checked.stdout


@pytest.mark.parametrize("target", ["PurgeQueue", "DeleteQueue", "ReceiveMessage"])
@pytest.mark.parametrize("form", ["presigned", "authorization header"])
def test_a_signed_query_get_with_an_added_target_header_runs_no_action_of_that_header(
        auth_server, owner, queue, form, target):
    owner.send_message(QueueUrl=queue, MessageBody="stays where it is")
    url = query_url(auth_server, urlsplit(queue).path, Action="GetQueueAttributes", **{"AttributeName.1": "All"})
    request = AWSRequest(method="GET", url=presign(url, "AKIDALICE", expires=300)) if form == "presigned" else \
        sign(AWSRequest(method="GET", url=url), "AKIDALICE")
    status, _, body = send(request)
    assert status == 200 and b"ApproximateNumberOfMessages" in body  # the signed action runs
    for added in ({"X-Amz-Target": f"AmazonSQS.{target}"},
                  {"X-Amz-Target": f"AmazonSQS.{target}", "Content-Type": "application/x-amz-json-1.0"}):
        answer = send(request, headers=added)
        assert refusal(answer) == (400, "IncompleteSignature"), answer
        assert b"'X-Amz-Target' must be a 'SignedHeader' in the AWS Authorization." in answer[2]
    assert visible(owner, queue) == 1  # neither purged, nor deleted, nor received


@pytest.mark.parametrize("left_out", ["x-amz-target", "content-type"])
def test_a_json_request_must_sign_its_target_and_its_content_type(auth_server, owner, queue, left_out):
    owner.send_message(QueueUrl=queue, MessageBody="stays where it is")
    request = sign_only(json_request(auth_server.endpoint, "GetQueueAttributes", {"QueueUrl": queue}),
                        "AKIDALICE", {"host", *ALL_BUT_HOST} - {left_out})
    for added in ({}, {"X-Amz-Target": "AmazonSQS.PurgeQueue"} if left_out == "x-amz-target" else
                  {"Content-Type": "application/x-www-form-urlencoded"}):
        answer = send(request, headers=added)
        assert refusal(answer) == (400, "IncompleteSignature"), answer
        assert f"'{left_out.title()}' must be a 'SignedHeader'".encode() in answer[2]
    assert visible(owner, queue) == 1
    status, _, _ = send(sign(json_request(auth_server.endpoint, "GetQueueAttributes", {"QueueUrl": queue}),
                             "AKIDALICE"))
    assert status == 200  # the same request signed over both headers


def test_a_query_post_must_sign_the_content_type_that_makes_its_body_a_form(auth_server, owner, queue):
    request = sign_only(query_post(auth_server, Action="SendMessage", QueueUrl=queue, MessageBody="form"),
                        "AKIDALICE", {"host", "x-amz-date"})
    answer = send(request)
    assert refusal(answer) == (400, "IncompleteSignature"), answer
    assert b"'Content-Type' must be a 'SignedHeader'" in answer[2]
    assert visible(owner, queue) == 0
    status, _, _ = send(sign(query_post(auth_server, Action="SendMessage", QueueUrl=queue, MessageBody="form"),
                             "AKIDALICE"))
    assert status == 200
    assert visible(owner, queue) == 1


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_a_signature_that_leaves_out_host_is_refused_and_a_forged_host_reaches_no_queue_url(
        auth_server, auth_folder, owner, protocol):
    name = f"forged-host-{protocol}"
    if protocol == "json":
        request = sign_only(json_request(auth_server.endpoint, "CreateQueue", {"QueueName": name}), "AKIDALICE",
                            ALL_BUT_HOST)
    else:
        request = sign_only(query_post(auth_server, Action="CreateQueue", QueueName=name), "AKIDALICE",
                            {"x-amz-date", "content-type"})
    answer = send(request, headers={"Host": "evil.example:1"})
    assert refusal(answer) == (400, "IncompleteSignature"), answer
    assert b"'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization." in answer[2]
    url = query_url(auth_server, "/", Action="CreateQueue", QueueName=name)
    presigned = AWSRequest(method="GET", url=presign_only(url, "AKIDALICE", names={"x-note"}, headers={"X-Note": "n"}))
    answer = send(presigned, headers={"Host": "evil.example:1", "X-Note": "n"})
    assert refusal(answer) == (400, "IncompleteSignature"), answer
    assert b"'Host' or ':authority' must be a 'SignedHeader'" in answer[2]
    signed_host = AWSRequest(method="GET", url=presign(url, "AKIDALICE", expires=300))
    assert refusal(send(signed_host, headers={"Host": "evil.example:1"})) == (403, "SignatureDoesNotMatch")
    assert name not in queues_in_the_database(auth_folder)


@pytest.mark.parametrize("expiry", ["missing", "eight days"])
@pytest.mark.parametrize("protocol", ["json", "query"])
def test_a_presigned_url_needs_an_expiry_of_at_most_seven_days(auth_server, owner, queue, protocol, expiry):
    def presigned(expires: int, with_expiry: bool) -> AWSRequest:
        if protocol == "query":
            url = query_url(auth_server, "/", Action="SendMessage", QueueUrl=queue, MessageBody="presigned")
            return AWSRequest(method="GET", url=presign_only(url, "AKIDALICE", expires=expires,
                                                             with_expiry=with_expiry))
        body = json.dumps({"QueueUrl": queue, "MessageBody": "presigned"}).encode()
        headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage",
                   "X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()}
        url = presign_only(auth_server.endpoint + "/", "AKIDALICE", expires=expires, with_expiry=with_expiry,
                           method="POST", headers=headers)
        return AWSRequest(method="POST", url=url, data=body, headers=headers)

    request = presigned(300, with_expiry=False) if expiry == "missing" else presigned(7 * 24 * 3600 + 1, True)
    assert ("X-Amz-Expires=" in request.url) == (expiry != "missing")
    answer = send(request)
    assert refusal(answer) == (400, "IncompleteSignature"), answer
    assert (b"must include 'X-Amz-Expires'" if expiry == "missing" else
            b"X-Amz-Expires must be a number of seconds from 1 to 604800") in answer[2]
    assert visible(owner, queue) == 0
    assert send(presigned(7 * 24 * 3600, True))[0] == 200  # seven days is allowed
    assert visible(owner, queue) == 1


def test_a_plus_sign_in_a_presigned_query_string_means_what_it_meant_when_signed(auth_server, owner, queue):
    url = presign(query_url(auth_server, "/", Action="SendMessage", QueueUrl=queue, MessageBody="1+1"),
                  "AKIDALICE", expires=300)
    assert "MessageBody=1%2B1" in url
    tampered = url.replace("MessageBody=1%2B1", "MessageBody=1+1")  # the Query protocol reads `+` as a space
    assert refusal(send(AWSRequest(method="GET", url=tampered))) == (403, "SignatureDoesNotMatch")
    assert visible(owner, queue) == 0
    assert send(AWSRequest(method="GET", url=url))[0] == 200
    assert owner.receive_message(QueueUrl=queue)["Messages"][0]["Body"] == "1+1"


BAD_REGIONS = ["us-east-1:222222222222", "<x>", "a" * 3000, "US-EAST-1", "us-east-1-", "us east 1"]


@pytest.mark.parametrize("region", BAD_REGIONS, ids=lambda r: r if len(r) < 30 else f"{len(r)}-characters")
@pytest.mark.parametrize("protocol", ["json", "query"])
def test_a_credential_scope_whose_region_is_no_region_name_is_refused_and_creates_nothing(
        auth_server, auth_folder, protocol, region):
    name = f"bad-region-{protocol}"
    request = json_request(auth_server.endpoint, "CreateQueue", {"QueueName": name}) if protocol == "json" else \
        query_post(auth_server, Action="CreateQueue", QueueName=name)
    answer = send(sign(request, "AKIDALICE", region=region))
    assert refusal(answer) == (403, "SignatureDoesNotMatch"), answer
    assert b"Credential should be scoped to a valid region, not '" in answer[2]
    assert len(answer[2]) < 2000  # the region is not echoed whole
    assert name not in queues_in_the_database(auth_folder)


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_every_region_name_of_aws_form_is_its_own_region(auth_server, protocol):
    for region in ("us-gov-west-1", "eusc-de-east-1", "local"):
        client = signed_client(protocol, auth_server.endpoint, "AKIDALICE", region=region)
        url = client.create_queue(QueueName=f"regional-{protocol}")["QueueUrl"]
        assert f"/queue/{region}/" in url


def test_without_credentials_a_region_that_is_no_region_name_is_refused_too(server_factory, tmp_path):
    open_server = server_factory(tmp_path / "open.db", "--test-clock")
    for region in ("us-east-1:222222222222", "a" * 3000):
        for request in (json_request(open_server.endpoint, "CreateQueue", {"QueueName": "anywhere"}),
                        AWSRequest(method="POST", url=open_server.endpoint + "/", headers={"Content-Type": FORM},
                                   data=urlencode({"Action": "CreateQueue", "QueueName": "anywhere",
                                                   "Version": "2012-11-05"}).encode())):
            answer = send(sign(request, "AKIDALICE", region=region))
            assert refusal(answer) == (403, "SignatureDoesNotMatch"), answer
    checked = run_queueserver("check", "--db", str(tmp_path / "open.db"))
    assert "queues: 0" in checked.stdout, checked.stdout
