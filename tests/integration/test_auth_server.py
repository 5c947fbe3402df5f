"""The server side of credentials: TLS with a verified certificate, reloading keys, and what it says at start."""

from __future__ import annotations

import json
import os
import signal

import pytest
from support.auth import KEYS, credentials_toml, make_test_ca, signed_client, write_credentials
from botocore.exceptions import ClientError, SSLError
from support.server import start, wait_for
from support.server import try_serve

PROTOCOLS = ["json", "query"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tls_serves_signed_requests_to_a_client_that_verifies_the_certificate(tmp_path, protocol):
    ca, cert, key = make_test_ca(tmp_path)
    server = start(tmp_path / "tls.db", "--credentials", str(write_credentials(tmp_path / "keys.toml")),
                   "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        assert server.endpoint.startswith("https://127.0.0.1:")
        alice = signed_client(protocol, server.endpoint, "AKIDALICE", verify=str(ca))
        url = alice.create_queue(QueueName="over-tls")["QueueUrl"]
        assert url.startswith("https://")
        alice.send_message(QueueUrl=url, MessageBody="encrypted on the wire")
        assert alice.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "encrypted on the wire"
        trusting_nobody = signed_client(protocol, server.endpoint, "AKIDALICE", verify=str(cert.parent / "none.pem"))
        with pytest.raises((SSLError, OSError)):
            trusting_nobody.list_queues()
        system_trust = signed_client(protocol, server.endpoint, "AKIDALICE", verify=True)
        with pytest.raises(SSLError):
            system_trust.list_queues()  # the test CA is nobody's but this test's
    finally:
        assert server.stop() == 0


def test_a_changed_credentials_file_adds_and_revokes_keys_without_a_restart(tmp_path):
    path = write_credentials(tmp_path / "keys.toml")
    server = start(tmp_path / "reload.db", "--credentials", str(path))
    try:
        newcomer = signed_client("json", server.endpoint, "AKIDCAROL", secret="carol-secret")
        with pytest.raises(ClientError) as caught:
            newcomer.list_queues()
        assert caught.value.response["Error"]["Code"] == "InvalidClientTokenId"
        keys = {k: v for k, v in KEYS.items() if k != "AKIDBOB"}
        keys["AKIDCAROL"] = {"secret_access_key": "carol-secret", "account_id": "333333333333"}
        path.write_text(credentials_toml(keys))

        def carol_is_in() -> bool:
            try:
                newcomer.list_queues()
            except ClientError:
                return False
            return True

        wait_for(carol_is_in, "the changed file to be read", timeout=15)
        with pytest.raises(ClientError) as caught:
            signed_client("json", server.endpoint, "AKIDBOB").list_queues()
        assert caught.value.response["Error"]["Code"] == "InvalidClientTokenId"
        path.write_text("[keys.AKIDBROKEN\n")  # a broken file keeps the keys in force
        wait_for(lambda: "credentials not reloaded" in server.stderr_text(), "the refusal in the log", timeout=15)
        assert carol_is_in()
    finally:
        assert server.stop() == 0


def test_sighup_rereads_the_credentials_file(tmp_path):
    path = write_credentials(tmp_path / "keys.toml")
    server = start(tmp_path / "sighup.db", "--credentials", str(path))
    try:
        before = path.stat()
        changed = credentials_toml(KEYS).replace('"bob-secret"', '"bob-SECRET"')
        with open(path, "r+") as file:  # same file, same size, same mtime: only SIGHUP can tell
            file.write(changed)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        renewed = signed_client("json", server.endpoint, "AKIDBOB", secret="bob-SECRET")
        with pytest.raises(ClientError):
            renewed.list_queues()
        server.send_signal(signal.SIGHUP)
        wait_for(lambda: "credentials reloaded" in server.stderr_text(), "the reload after SIGHUP", timeout=15)
        assert renewed.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_reload_takes_effect_on_the_very_next_request_of_a_key_that_was_just_used(tmp_path, protocol):
    """The verifier keeps each key's signing key between requests; a reload must not leave any in force."""
    path = write_credentials(tmp_path / "keys.toml")
    server = start(tmp_path / "next.db", "--credentials", str(path))
    try:
        bob, worker = (signed_client(protocol, server.endpoint, key) for key in ("AKIDBOB", "AKIDWORKER"))
        queue_url = signed_client(protocol, server.endpoint, "AKIDALICE").create_queue(QueueName="orders")["QueueUrl"]
        assert bob.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
        with pytest.raises(ClientError) as caught:  # the worker's policy names only the queue "jobs"
            worker.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])
        assert caught.value.response["Error"]["Code"] == "AccessDenied"
        keys = {k: dict(v) for k, v in KEYS.items() if k != "AKIDBOB"}
        keys["AKIDWORKER"]["policy"] = keys["AKIDWORKER"]["policy"].replace(":jobs", ":orders")
        keys["AKIDALICE"]["secret_access_key"] = "alice-new-secret"
        path.write_text(credentials_toml(keys))
        server.send_signal(signal.SIGHUP)
        wait_for(lambda: "credentials reloaded" in server.stderr_text(), "the reload after SIGHUP", timeout=15)
        with pytest.raises(ClientError) as caught:
            bob.list_queues()
        assert caught.value.response["Error"]["Code"] == "InvalidClientTokenId"
        with pytest.raises(ClientError) as caught:
            signed_client(protocol, server.endpoint, "AKIDALICE").list_queues()  # the secret it had a moment ago
        assert caught.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
        attributes = worker.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
        assert attributes["QueueArn"].endswith(":orders")
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_reload_that_narrows_a_keys_policy_revokes_what_it_was_just_allowed_with_the_same_secret(tmp_path, protocol):
    """Decisions without conditions are remembered per key; a reloaded key with the same secret is a new key."""
    path = write_credentials(tmp_path / "keys.toml")
    server = start(tmp_path / "narrowed.db", "--credentials", str(path))
    try:
        alice, worker = (signed_client(protocol, server.endpoint, key) for key in ("AKIDALICE", "AKIDWORKER"))
        jobs = alice.create_queue(QueueName="jobs")["QueueUrl"]
        for _ in range(2):  # the second answer may come from what the first decided
            worker.get_queue_attributes(QueueUrl=jobs, AttributeNames=["QueueArn"])
            alice.send_message(QueueUrl=jobs, MessageBody="allowed")
        keys = {k: dict(v) for k, v in KEYS.items()}
        keys["AKIDWORKER"]["policy"] = keys["AKIDWORKER"]["policy"].replace(":jobs", ":other")
        keys["AKIDALICE"]["policy"] = json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Deny", "Action": "sqs:SendMessage", "Resource": "*"},
            {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}]})
        path.write_text(credentials_toml(keys))
        server.send_signal(signal.SIGHUP)
        wait_for(lambda: "credentials reloaded" in server.stderr_text(), "the reload after SIGHUP", timeout=15)
        for call in (lambda: worker.get_queue_attributes(QueueUrl=jobs, AttributeNames=["QueueArn"]),
                     lambda: alice.send_message(QueueUrl=jobs, MessageBody="denied now")):
            with pytest.raises(ClientError) as caught:
                call()
            assert caught.value.response["Error"]["Code"] == "AccessDenied"
        attributes = alice.get_queue_attributes(QueueUrl=jobs, AttributeNames=["ApproximateNumberOfMessages"])
        assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "2"
    finally:
        assert server.stop() == 0


def test_without_credentials_the_server_says_it_is_open_and_warns_off_loopback(tmp_path):
    server = start(tmp_path / "open.db")
    try:
        assert "INFO queueserver.server: no --credentials: every request is accepted" in server.stderr_text()
    finally:
        assert server.stop() == 0
    exposed = try_serve(tmp_path / "exposed.db", "--host", "0.0.0.0")
    assert "WARNING queueserver.server: no --credentials: every request is accepted" in exposed.stderr


def test_a_broken_credentials_file_stops_the_start_with_a_clear_message(tmp_path):
    path = tmp_path / "keys.toml"
    path.write_text('[keys.AKIDX]\nsecret_access_key = "s"\naccount_id = "12345"\n')
    refusal = try_serve(tmp_path / "never.db", "--credentials", str(path))
    assert refusal.returncode == 2
    assert "account_id must be a string of 12 digits" in refusal.stderr
    assert not (tmp_path / "never.db").exists()
