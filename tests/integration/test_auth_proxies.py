"""Forwarding headers count only from a trusted proxy: aws:SourceIp is the socket's peer, and
aws:SecureTransport is true only on the TLS listener or from a trusted proxy that says https.

Real requests carry `X-Forwarded-For` / `X-Forwarded-Proto` (added after signing, as a proxy
adds them) to three servers with credentials on: a plain one that trusts no proxy, one started
with `--trusted-proxy`, and a TLS one.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError
from support.auth import (
    OTHER_ACCOUNT,
    add_unsigned_headers,
    json_request,
    make_test_ca,
    presign,
    refusal,
    send,
    sign,
    signed_client,
    write_credentials,
)
from support.server import Server, start, try_serve
from support.sqs import arn_of, visible

OFFICE = "10.0.0.0/8"
FROM_THE_OFFICE = {"X-Forwarded-For": "10.9.9.9"}
FORM = "application/x-www-form-urlencoded"  # with no charset: botocore's presigner then signs it


@pytest.fixture(scope="module")
def proxied_server(auth_folder: Path) -> Iterator[Server]:
    """Credentials on, behind a proxy on loopback (named by address and by network, as a list)."""
    server = start(auth_folder / "proxied.db", "--test-clock", "--credentials", str(auth_folder / "keys.toml"),
                   "--trusted-proxy", "192.0.2.1,127.0.0.0/8")
    yield server
    assert server.stop() == 0


def denied(call: Any) -> None:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("AccessDenied", 403)


def guarded_queue(endpoint: str, protocol: str, name: str, **client_options: Any) -> tuple[Any, str]:
    """Alice's client and a queue of hers whose policy lets Bob send only from the office network, and
    refuses receives over plain HTTP."""
    alice = signed_client(protocol, endpoint, "AKIDALICE", **client_options)
    url = alice.create_queue(QueueName=f"{name}-{protocol}")["QueueUrl"]
    arn = arn_of(alice, url)
    alice.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Action": "sqs:SendMessage", "Resource": arn,
         "Condition": {"IpAddress": {"aws:SourceIp": OFFICE}}},
        {"Effect": "Deny", "Principal": "*", "Action": "sqs:ReceiveMessage", "Resource": arn,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    ]})})
    return alice, url


def unsigned_payload_request(endpoint: str, protocol: str, queue_url: str) -> AWSRequest:
    """A SendMessage signed with `x-amz-content-sha256: UNSIGNED-PAYLOAD` in the header form."""
    if protocol == "json":
        request = json_request(endpoint, "SendMessage", {"QueueUrl": queue_url, "MessageBody": "unsigned body"})
    else:
        request = AWSRequest(method="POST", url=endpoint + "/", headers={"Content-Type": FORM}, data=urlencode({
            "Action": "SendMessage", "QueueUrl": queue_url, "MessageBody": "unsigned body",
            "Version": "2012-11-05"}).encode())
    request.headers["X-Amz-Content-SHA256"] = "UNSIGNED-PAYLOAD"
    return sign(request, "AKIDALICE")


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_forwarding_headers_from_a_peer_that_is_no_trusted_proxy_change_nothing(auth_server, protocol):
    alice, url = guarded_queue(auth_server.endpoint, protocol, "untrusted")
    forwarded = {**FROM_THE_OFFICE, "X-Forwarded-Proto": "https"}
    bob = add_unsigned_headers(signed_client(protocol, auth_server.endpoint, "AKIDBOB"), forwarded)
    denied(lambda: bob.send_message(QueueUrl=url, MessageBody="claims to be in the office"))
    forwarding_alice = add_unsigned_headers(signed_client(protocol, auth_server.endpoint, "AKIDALICE"), forwarded)
    denied(lambda: forwarding_alice.receive_message(QueueUrl=url))  # still plain HTTP
    assert forwarding_alice.get_queue_url(QueueName=url.rsplit("/", 1)[1])["QueueUrl"].startswith("http://")
    answer = send(unsigned_payload_request(auth_server.endpoint, protocol, url), headers=forwarded)
    assert refusal(answer) == (403, "SignatureDoesNotMatch"), answer
    assert visible(alice, url) == 0


def test_a_deny_outside_an_address_range_is_not_bypassed_by_a_forwarded_address(auth_server, protocol, alice,
                                                                                 alice_queue_url):
    alice.set_queue_attributes(QueueUrl=alice_queue_url, Attributes={"Policy": json.dumps({"Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "sqs:SendMessage", "Resource": arn_of(alice, alice_queue_url),
         "Condition": {"NotIpAddress": {"aws:SourceIp": OFFICE}}}]})})
    forwarding = add_unsigned_headers(signed_client(protocol, auth_server.endpoint, "AKIDALICE"), FROM_THE_OFFICE)
    denied(lambda: forwarding.send_message(QueueUrl=alice_queue_url, MessageBody="from loopback all the same"))
    assert visible(alice, alice_queue_url) == 0


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_a_trusted_proxy_names_the_client_and_the_scheme(proxied_server, protocol):
    assert "X-Forwarded-For and X-Forwarded-Proto are believed from 192.0.2.1, 127.0.0.0/8" in \
        proxied_server.stderr_text()
    alice, url = guarded_queue(proxied_server.endpoint, protocol, "proxied")
    endpoint = proxied_server.endpoint
    denied(lambda: signed_client(protocol, endpoint, "AKIDBOB").send_message(QueueUrl=url, MessageBody="proxy's own"))
    bob = add_unsigned_headers(signed_client(protocol, endpoint, "AKIDBOB"), FROM_THE_OFFICE)
    bob.send_message(QueueUrl=url, MessageBody="from the office, says the proxy")
    # A client's own claim comes before what the proxy appends: the nearest address not a proxy is the client.
    spoofing = add_unsigned_headers(signed_client(protocol, endpoint, "AKIDBOB"),
                                    {"X-Forwarded-For": "10.9.9.9, 198.51.100.7"})
    denied(lambda: spoofing.send_message(QueueUrl=url, MessageBody="claims the office, comes from outside"))
    over_http = add_unsigned_headers(signed_client(protocol, endpoint, "AKIDALICE"), {"X-Forwarded-Proto": "http"})
    denied(lambda: over_http.receive_message(QueueUrl=url))
    over_https = add_unsigned_headers(signed_client(protocol, endpoint, "AKIDALICE"), {"X-Forwarded-Proto": "https"})
    assert over_https.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "from the office, says the proxy"
    assert over_https.get_queue_url(QueueName=url.rsplit("/", 1)[1])["QueueUrl"].startswith("https://")
    status, _, body = send(unsigned_payload_request(endpoint, protocol, url), headers={"X-Forwarded-Proto": "https"})
    assert status == 200, body  # the proxy received it over TLS
    assert visible(alice, url) == 1


def test_on_the_tls_listener_the_transport_is_secure_and_forwarding_headers_still_count_for_nothing(tmp_path):
    ca, cert, key = make_test_ca(tmp_path)
    server = start(tmp_path / "tls.db", "--credentials", str(write_credentials(tmp_path / "keys.toml")),
                   "--tls-cert", str(cert), "--tls-key", str(key))
    context = ssl.create_default_context(cafile=str(ca))
    try:
        for protocol in ("json", "query"):
            alice, url = guarded_queue(server.endpoint, protocol, "tls", verify=str(ca))
            plain_says = add_unsigned_headers(signed_client(protocol, server.endpoint, "AKIDALICE", verify=str(ca)),
                                              {"X-Forwarded-Proto": "http"})
            assert plain_says.receive_message(QueueUrl=url).get("Messages", []) == []  # allowed: the socket is TLS
            bob = add_unsigned_headers(signed_client(protocol, server.endpoint, "AKIDBOB", verify=str(ca)),
                                       FROM_THE_OFFICE)
            denied(lambda: bob.send_message(QueueUrl=url, MessageBody="claims to be in the office"))
            status, _, body = send(unsigned_payload_request(server.endpoint, protocol, url), context=context)
            assert status == 200, body  # UNSIGNED-PAYLOAD over TLS, signed so in the header form
            # A presigned URL's UNSIGNED-PAYLOAD covers no body, whatever header is added to say so.
            if protocol == "json":
                headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.GetQueueAttributes"}
                presigned = presign(url, "AKIDALICE", expires=300, method="POST", headers=headers)
                body = json.dumps({"QueueUrl": url + "-another", "AttributeNames": ["All"]}).encode()
            else:
                headers = {"Content-Type": FORM}
                presigned = presign(f"{url}?Action=GetQueueAttributes&Version=2012-11-05", "AKIDALICE",
                                    expires=300, method="POST", headers=headers)
                body = urlencode({"Action": "PurgeQueue", "Version": "2012-11-05"}).encode()
            assert send(AWSRequest(method="POST", url=presigned, headers=headers), context=context)[0] == 200
            answer = send(AWSRequest(method="POST", url=presigned, headers=headers, data=body),
                          headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"}, context=context)
            assert refusal(answer) == (403, "SignatureDoesNotMatch"), answer
            assert b"A presigned request with a body must sign the body's hash." in answer[2]
            assert visible(alice, url) == 1  # the one unsigned-payload send; nothing purged, nothing more sent
    finally:
        assert server.stop() == 0


def test_a_trusted_proxy_that_is_no_address_stops_the_start(tmp_path):
    refusal_ = try_serve(tmp_path / "never.db", "--trusted-proxy", "proxy.internal")
    assert refusal_.returncode == 2
    assert "--trusted-proxy 'proxy.internal': expected an IP address or a network (10.0.0.0/8)" in refusal_.stderr
    assert not (tmp_path / "never.db").exists()
