"""Nothing of one tenant reaches another, and what the server cannot evaluate denies.

Against real server processes with credentials on: a signed request acts only on queues of its
signature's region (aws:RequestedRegion is the queue's); `/ready` says ready or not, and its problems
and replica only to a key allowed queueserver:GetMetrics; the console's server page shows the database
path and totals to admin keys only; the overview's Previous/Next links name only queues the viewer may
see; a stored Policy this version cannot read (as an older one may have stored it) grants no other
account, keeps its readable Deny, is logged once, named on the queue's page and counted in /metrics.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError
from support.auth import (OTHER_ACCOUNT, OWNER_ACCOUNT, secret_of, send, sign, signed_call, signed_client,
                          write_credentials)
from support.console import Browser
from support.metrics import Scrape
from support.server import Server
from support.wire import error_code
from support.wire import send as send_raw



def signed_get(endpoint: str, path: str, key_id: str) -> tuple[int, bytes]:
    status, _, body = send(sign(AWSRequest(method="GET", url=endpoint + path), key_id))
    return status, body


def _error(call: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    return error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Message"]


@pytest.mark.parametrize("way", ["json", "query-post"])
def test_a_key_signing_for_one_region_cannot_act_on_a_queue_of_another_by_its_url(auth_server: Server,
                                                                                   way: str) -> None:
    europe = signed_client("json", auth_server.endpoint, "AKIDALICE", region="eu-west-1")
    url = europe.create_queue(QueueName=f"regional-{way}")["QueueUrl"]
    assert "/queue/eu-west-1/" in url
    europe.send_message(QueueUrl=url, MessageBody="kept")
    for action, members in (("SendMessage", {"QueueUrl": url, "MessageBody": "x"}), ("PurgeQueue", {"QueueUrl": url})):
        response = signed_call(way, auth_server.endpoint, "AKIDALICE", action, members, region="us-east-1")
        assert (response.status, error_code(response)) == (403, "SignatureDoesNotMatch"), response.body[:300]
        assert b"Credential should be scoped to a valid region" in response.body
    counts = europe.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counts["Attributes"]["ApproximateNumberOfMessages"] == "1"


def test_requested_region_is_the_region_of_the_queue_acted_on(auth_server: Server) -> None:
    europe = signed_client("json", auth_server.endpoint, "AKIDALICE", region="eu-west-1")
    url = europe.create_queue(QueueName="regional-policy")["QueueUrl"]
    europe.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Action": "sqs:SendMessage", "Resource": "*",
         "Condition": {"StringEquals": {"aws:RequestedRegion": "eu-west-1"}}}]})})
    signed_client("json", auth_server.endpoint, "AKIDBOB", region="eu-west-1").send_message(
        QueueUrl=url, MessageBody="allowed in the queue's region")


def test_a_console_session_acts_in_the_region_of_the_queue_it_shows(auth_server: Server) -> None:
    europe = signed_client("json", auth_server.endpoint, "AKIDEUROPE", region="eu-west-1")
    url = europe.create_queue(QueueName="regional-console")["QueueUrl"]
    assert _error(lambda: signed_client("json", auth_server.endpoint, "AKIDEUROPE").create_queue(
        QueueName="regional-console"))[:2] == ("AccessDenied", 403)  # us-east-1: outside its region
    browser = _login(auth_server.endpoint, "AKIDEUROPE")
    status, _, html = browser.request("GET", f"/console/queues/eu-west-1/{OWNER_ACCOUNT}/regional-console")
    assert status == 200 and "regional-console" in html
    status, headers, _ = browser.request("POST", f"/console/queues/eu-west-1/{OWNER_ACCOUNT}/regional-console/send",
                                         {"csrf_token": browser.cookies["qs_console_csrf"], "body": "from the page"})
    assert status == 303 and "notice=" in headers["location"], headers
    counts = europe.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counts["Attributes"]["ApproximateNumberOfMessages"] == "1"


def test_ready_names_nothing_to_a_stranger_and_its_details_to_a_metrics_key(auth_server: Server) -> None:
    anonymous = send_raw(auth_server.endpoint + "/ready", "GET", None, {})
    assert anonymous.status == 200 and json.loads(anonymous.body) == {"status": "ready"}
    for key_id in ("AKIDALICE", "AKIDOPS", "AKIDMALLORY"):
        status, body = signed_get(auth_server.endpoint, "/ready", key_id)
        assert (status, json.loads(body)) == (200, {"status": "ready"}), key_id
    status, body = signed_get(auth_server.endpoint, "/ready", "AKIDSCRAPER")
    assert status == 200 and json.loads(body)["status"] == "ready"


def _login(endpoint: str, key_id: str) -> Browser:
    browser = Browser(endpoint)
    assert browser.login(key_id, secret_of(key_id)) == (303, "/console/")
    return browser


def test_the_server_page_shows_the_database_and_totals_to_admin_keys_only(auth_server: Server) -> None:
    status, _, tenant_page = _login(auth_server.endpoint, "AKIDBOB").request("GET", "/console/server")
    assert status == 200 and "Database file" not in tenant_page and "auth.db" not in tenant_page
    assert "<th>Queues</th>" not in tenant_page and "Uptime" in tenant_page
    status, _, admin_page = _login(auth_server.endpoint, "AKIDOPS").request("GET", "/console/server")
    assert status == 200 and "auth.db" in admin_page and "<th>Queues</th>" in admin_page


def test_the_overview_links_name_only_queues_the_viewer_may_see(auth_server: Server) -> None:
    alice = signed_client("json", auth_server.endpoint, "AKIDALICE")
    bob = signed_client("json", auth_server.endpoint, "AKIDBOB")
    for n in range(5):  # another tenant's queues, between two of Bob's in the overview's name order
        alice.create_queue(QueueName=f"pg-m-alice-secret-{n}")
    bob.create_queue(QueueName="pg-a-bob")
    bob.create_queue(QueueName="pg-z-bob")
    browser = _login(auth_server.endpoint, "AKIDBOB")
    # The page after Bob's first queue starts among Alice's: its Previous link must not name one of them.
    status, _, html = browser.request("GET", f"/console/?prefix=pg-&after=us-east-1/{OTHER_ACCOUNT}/pg-a-bob")
    assert status == 200 and "alice" not in html
    assert re.findall(r"/console/queues/us-east-1/\d+/(pg-[\w-]+)", html) == ["pg-z-bob"]
    previous = re.search(r'rel="prev" href="\?([^"]+)"', html)
    assert previous is not None, "there is a page before"
    status, _, html = browser.request("GET", "/console/?" + previous.group(1).replace("&amp;", "&"))
    assert status == 200 and "alice" not in html
    assert re.findall(r"/console/queues/us-east-1/\d+/(pg-[\w-]+)", html) == ["pg-a-bob"]


@pytest.fixture
def legacy(tmp_path: Path, server_factory: Any) -> Any:
    """A server restarted on a database whose queue `legacy` holds a Policy this version cannot read."""
    folder = tmp_path
    keys = write_credentials(folder / "keys.toml")
    db = folder / "q.db"
    server = server_factory(db, "--credentials", str(keys))
    url = signed_client("json", server.endpoint, "AKIDALICE").create_queue(QueueName="legacy")["QueueUrl"]
    server.stop()
    policy = json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Action": "sqs:*", "Resource": "*"},
        {"Effect": "Deny", "Principal": "*", "Action": "sqs:ReceiveMessage", "Resource": "*"},
        {"Effect": "Allow", "Principal": {"Federated": "cognito-identity.amazonaws.com"}, "Action": "sqs:*",
         "Resource": "*"}]})
    with sqlite3.connect(db) as conn:  # as an older version, which read less, could have stored it
        conn.execute("UPDATE queues SET attributes = json_set(attributes, '$.Policy', ?) WHERE name = 'legacy'",
                     (policy,))
    conn.close()
    return server_factory(db, "--credentials", str(keys)), url.rsplit("/", 2)[1:]


def test_a_stored_policy_that_no_longer_parses_denies_other_accounts_and_keeps_its_deny(legacy: Any) -> None:
    server, (account, name) = legacy
    assert account == OWNER_ACCOUNT
    url = f"{server.endpoint}/{account}/{name}"
    alice = signed_client("json", server.endpoint, "AKIDALICE")
    bob = signed_client("query", server.endpoint, "AKIDBOB")
    for _ in range(2):
        assert _error(lambda: bob.send_message(QueueUrl=url, MessageBody="x"))[:2] == ("AccessDenied", 403)
    alice.send_message(QueueUrl=url, MessageBody="the owner still sends")
    assert _error(lambda: alice.receive_message(QueueUrl=url))[:2] == ("AccessDenied", 403)
    log = server.stderr_text()
    assert log.count("cannot be evaluated") == 1, log[-2000:]
    status, body = signed_get(server.endpoint, "/metrics", "AKIDSCRAPER")
    assert status == 200 and Scrape(body.decode()).value("queueserver_unreadable_policies") == 1
    status, _, page = _login(server.endpoint, "AKIDALICE").request(
        "GET", f"/console/queues/us-east-1/{account}/{name}")
    assert status == 200 and 'id="policy-unreadable"' in page

