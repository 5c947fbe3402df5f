"""The console with --credentials: a login form, sessions that never hold the secret, and each key seeing
and doing only what its policies allow (the SQS endpoint's own evaluation), over raw HTTP and in chromium."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

import boto3
import pytest
from botocore.config import Config
from playwright.sync_api import expect

from queueserver.config import ServerConfig

OWNER, OTHER = "111111111111", "222222222222"
WORKER_POLICY = json.dumps({"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Action": ["sqs:GetQueue*", "sqs:ReceiveMessage", "sqs:QueueserverBrowseMessages",
                                  "sqs:ListDeadLetterSourceQueues"],
    "Resource": f"arn:aws:sqs:*:{OWNER}:login-jobs"}]})
KEYS = {
    "AKIDALICE": {"secret_access_key": "alice-secret", "account_id": OWNER, "name": "alice"},
    "AKIDBOB": {"secret_access_key": "bob-secret", "account_id": OTHER, "name": "bob"},
    "AKIDWORKER": {"secret_access_key": "worker-secret", "account_id": OWNER, "name": "worker",
                   "policy": WORKER_POLICY},
}


def _toml(keys: dict[str, dict[str, str]]) -> str:
    return "\n".join(f"[keys.{key_id}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items())
                     for key_id, fields in keys.items())


class Browser:
    """Raw HTTP with a cookie jar: what a browser sends, and nothing the console's pages did not set."""

    def __init__(self, endpoint: str) -> None:
        self.address = urlsplit(endpoint)
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, fields: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection(self.address.hostname, self.address.port, timeout=15)
        headers = {"content-type": "application/x-www-form-urlencoded"}
        if self.cookies:
            headers["cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            conn.request(method, path, body=urlencode(fields or {}).encode(), headers=headers)
            response = conn.getresponse()
            for name, value in response.getheaders():
                if name.lower() == "set-cookie":
                    for morsel in SimpleCookie(value).values():
                        if morsel["max-age"] == "0" or not morsel.value.strip('"'):
                            self.cookies.pop(morsel.key, None)
                        else:
                            self.cookies[morsel.key] = morsel.value
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
        finally:
            conn.close()

    def token(self) -> str:
        status, _, body = self.request("GET", "/console/login")
        assert status == 200
        match = re.search(r'name="csrf_token" value="([^"]+)"', body)
        assert match is not None
        return match.group(1)

    def login(self, key_id: str, secret: str) -> tuple[int, str]:
        status, headers, _ = self.request("POST", "/console/login", {
            "csrf_token": self.token(), "access_key_id": key_id, "secret_access_key": secret})
        return status, headers.get("location", "")


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("login") / "keys.toml"
    path.write_text(_toml(KEYS))
    return path


@pytest.fixture(scope="module")
def login_server(tmp_path_factory: pytest.TempPathFactory, keys_file: Path) -> Iterator[Any]:
    from support.server import running

    with running(tmp_path_factory.mktemp("login-db") / "q.db", "--credentials", str(keys_file)) as proc:
        yield proc


def _client(login_server: Any, key_id: str) -> Any:
    return boto3.session.Session().client(
        "sqs", region_name="us-east-1", endpoint_url=login_server.endpoint, aws_access_key_id=key_id,
        aws_secret_access_key=KEYS[key_id]["secret_access_key"], config=Config(retries={"total_max_attempts": 1}))


def test_a_server_with_credentials_serves_the_console_behind_its_login() -> None:
    assert ServerConfig(credentials_path="keys.toml", console=True).console_enabled is True
    assert ServerConfig(credentials_path="keys.toml", host="127.0.0.1").console_enabled is True


def test_every_page_and_form_asks_to_log_in_first_and_an_unauthenticated_form_changes_nothing(
        login_server: Any) -> None:
    browser = Browser(login_server.endpoint)
    for path in ("/console", "/console/", "/console/server", "/console/queues/us-east-1/anything"):
        status, headers, _ = browser.request("GET", path)
        assert (status, headers["location"]) == (303, "/console/login"), path
    token = browser.token()
    status, _, _ = browser.request("POST", "/console/create", {"csrf_token": token, "name": "sneaky-queue"})
    assert status == 403
    assert "QueueUrls" not in _client(login_server, "AKIDALICE").list_queues(QueueNamePrefix="sneaky")


@pytest.mark.parametrize("key_id,secret", [("AKIDALICE", "wrong-secret"), ("AKIDNOSUCHKEY", "alice-secret"),
                                           ("AKIDALICE", "")])
def test_a_wrong_secret_or_an_unknown_key_is_refused(login_server: Any, key_id: str, secret: str) -> None:
    browser = Browser(login_server.endpoint)
    status, location = browser.login(key_id, secret)
    assert status == 303 and location.startswith("/console/login?error=")
    assert "qs_console_session" not in browser.cookies
    assert browser.request("GET", "/console/")[0] == 303


def test_a_login_without_the_forms_token_is_refused(login_server: Any) -> None:
    browser = Browser(login_server.endpoint)
    browser.token()
    status, _, _ = browser.request("POST", "/console/login", {
        "csrf_token": "forged", "access_key_id": "AKIDALICE", "secret_access_key": "alice-secret"})
    assert status == 403 and "qs_console_session" not in browser.cookies


def test_the_session_cookie_is_httponly_strict_and_never_holds_the_secret(login_server: Any) -> None:
    browser = Browser(login_server.endpoint)
    token = browser.token()
    _, headers, _ = browser.request("POST", "/console/login", {
        "csrf_token": token, "access_key_id": "AKIDALICE", "secret_access_key": "alice-secret"})
    cookie = headers["set-cookie"]
    assert "qs_console_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "alice-secret" not in cookie and "AKIDALICE" not in cookie
    status, _, body = browser.request("GET", "/console/")
    assert status == 200 and f"arn:aws:iam::{OWNER}:user/alice" in body


def test_a_key_limited_to_one_queue_sees_only_it_and_cannot_purge_another_even_by_a_forged_form(
        login_server: Any) -> None:
    alice = _client(login_server, "AKIDALICE")
    jobs = alice.create_queue(QueueName="login-jobs")["QueueUrl"]
    other = alice.create_queue(QueueName="login-other")["QueueUrl"]
    alice.send_message(QueueUrl=other, MessageBody="keep me")
    worker = Browser(login_server.endpoint)
    assert worker.login("AKIDWORKER", "worker-secret") == (303, "/console/")
    status, _, body = worker.request("GET", "/console/")
    assert status == 200 and "login-jobs" in body and "login-other" not in body
    assert worker.request("GET", f"/console/queues/us-east-1/{OWNER}/login-other")[0] == 403
    status, _, body = worker.request("GET", f"/console/queues/us-east-1/{OWNER}/login-jobs")
    assert status == 200 and "Purge" not in body  # the policy leaves PurgeQueue out: no button
    token = worker.cookies["qs_console_csrf"]
    for name in ("login-other", "login-jobs"):
        status, _, _ = worker.request("POST", f"/console/queues/us-east-1/{OWNER}/{name}/purge",
                                      {"csrf_token": token, "confirm": name})
        assert status == 403
    assert alice.get_queue_attributes(QueueUrl=other, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"] == "1"
    assert alice.get_queue_url(QueueName="login-jobs")["QueueUrl"] == jobs


def test_another_accounts_queue_is_invisible_until_add_permission_grants_it(login_server: Any) -> None:
    bob = _client(login_server, "AKIDBOB")
    url = bob.create_queue(QueueName="login-bobs-queue")["QueueUrl"]
    alice = Browser(login_server.endpoint)
    alice.login("AKIDALICE", "alice-secret")
    assert "login-bobs-queue" not in alice.request("GET", "/console/")[2]
    bob.add_permission(QueueUrl=url, Label="alice-looks", AWSAccountIds=[OWNER], Actions=["GetQueueAttributes"])
    listed = alice.request("GET", "/console/")[2]
    assert (f'<a href="/console/queues/us-east-1/{OTHER}/login-bobs-queue">login-bobs-queue</a> '
            f'<small>(account {OTHER})</small>') in listed


def test_logout_ends_the_session_even_for_a_copy_of_its_cookie(login_server: Any) -> None:
    browser = Browser(login_server.endpoint)
    browser.login("AKIDALICE", "alice-secret")
    copied = dict(browser.cookies)
    assert browser.request("GET", "/console/")[0] == 200
    status, headers, _ = browser.request("POST", "/console/logout", {"csrf_token": browser.cookies["qs_console_csrf"]})
    assert status == 303 and headers["location"].startswith("/console/login")
    assert browser.request("GET", "/console/")[0] == 303
    browser.cookies = copied
    assert browser.request("GET", "/console/")[0] == 303


def test_a_key_revoked_in_the_credentials_file_loses_its_session_at_the_next_request(
        login_server: Any, keys_file: Path) -> None:
    browser = Browser(login_server.endpoint)
    browser.login("AKIDBOB", "bob-secret")
    assert browser.request("GET", "/console/")[0] == 200
    keys_file.write_text(_toml({k: v for k, v in KEYS.items() if k != "AKIDBOB"}))
    try:
        assert browser.request("GET", "/console/")[0] == 303
        assert browser.login("AKIDBOB", "bob-secret")[1].startswith("/console/login?error=")
    finally:
        keys_file.write_text(_toml(KEYS))


def test_in_chromium_a_key_logs_in_sees_its_queue_and_logs_out(login_server: Any, page: Any) -> None:
    _client(login_server, "AKIDALICE").create_queue(QueueName="login-browser-queue")
    page.goto(login_server.endpoint + "/console/")
    page.get_by_label("Access key ID").fill("AKIDALICE")
    page.get_by_label("Secret access key").fill("alice-secret")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="login-browser-queue").first.click()
    page.get_by_role("heading", name=re.compile("login-browser-queue")).wait_for()
    page.get_by_role("button", name="Log out").click()
    page.get_by_role("heading", name="Log in").wait_for()
    page.goto(login_server.endpoint + "/console/")
    page.get_by_role("heading", name="Log in").wait_for()


def _share(bob: Any, url: str, *actions: str) -> None:
    """Bob's queue policy: Alice's account may run `actions` on it."""
    bob.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{OWNER}:root"},
        "Action": [f"sqs:{a}" for a in actions], "Resource": f"arn:aws:sqs:us-east-1:{OTHER}:login-shared"}]})})


def _visible_in(client: Any, url: str) -> str:
    return client.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"]


def test_in_chromium_another_accounts_queue_opens_and_offers_exactly_what_its_policy_allows(
        login_server: Any, page: Any) -> None:
    bob = _client(login_server, "AKIDBOB")
    url = bob.create_queue(QueueName="login-shared", tags={"owner": "bob"})["QueueUrl"]
    bob.send_message(QueueUrl=url, MessageBody="<b>for alice</b>")
    _share(bob, url, "GetQueueAttributes", "ReceiveMessage")
    page.goto(login_server.endpoint + "/console/")
    page.get_by_label("Access key ID").fill("AKIDALICE")
    page.get_by_label("Secret access key").fill("alice-secret")
    page.get_by_role("button", name="Log in").click()
    row = page.locator("tr[data-queue=login-shared]")
    expect(row).to_contain_text(f"(account {OTHER})")
    row.get_by_role("link", name="login-shared").click()
    expect(page).to_have_url(re.compile(f"/console/queues/us-east-1/{OTHER}/login-shared$"))
    expect(page.locator(".crumbs")).to_contain_text(f"account {OTHER}")
    expect(page.locator("#queue-url")).to_have_text(url)  # Bob's queue URL, as his client has it
    expect(page.locator("#counts [data-count=visible]")).to_have_text("1")
    expect(page.locator("main")).to_contain_text("may not browse")  # sqs:QueueserverBrowseMessages is not granted
    for absent in ("form.send", "form[action$='/purge']", "form[action$='/delete']", "form.subscribe"):
        expect(page.locator(absent)).to_have_count(0)
    expect(page.get_by_role("heading", name="Tags")).to_have_count(0)  # ListQueueTags: the owner's only

    token = next(c["value"] for c in page.context.cookies() if c["name"] == "qs_console_csrf")
    forged = page.request.post(page.url + "/purge", form={"csrf_token": token, "confirm": "login-shared"},
                               headers={"origin": login_server.endpoint}, max_redirects=0)
    assert forged.status == 403
    assert _visible_in(bob, url) == "1"

    _share(bob, url, "GetQueueAttributes", "ReceiveMessage", "QueueserverBrowseMessages", "SendMessage", "PurgeQueue")
    page.reload()
    expect(page.locator("table.messages td.body")).to_have_text(["<b>for alice</b>"])
    form = page.locator("form.send")
    form.locator("textarea[name=body]").fill("from alice")
    form.get_by_role("button", name="Send").click()
    expect(page.locator(".notice")).to_contain_text("sent.")
    expect(page.locator("table.messages td.body")).to_have_text(["<b>for alice</b>", "from alice"])
    expect(page.locator("form[action$='/delete']")).to_have_count(0)  # DeleteQueue is never cross-account
    page.on("dialog", lambda dialog: dialog.accept())
    purge = page.locator("form[action$='/purge']")
    purge.locator("input[name=confirm]").fill("login-shared")
    purge.get_by_role("button", name="Purge").click()
    expect(page.locator(".notice")).to_have_text("Queue purged.")
    assert _visible_in(bob, url) == "0"
    page.goto(login_server.endpoint + f"/console/queues/us-east-1/{OWNER}/login-shared")  # Alice's account has none
    expect(page.locator("h1")).to_have_text(f"No queue login-shared in us-east-1, account {OWNER}")


def test_a_key_without_the_subscription_actions_neither_sees_nor_creates_subscriptions(login_server: Any) -> None:
    _client(login_server, "AKIDALICE").create_queue(QueueName="login-jobs")
    page = f"/console/queues/us-east-1/{OWNER}/login-jobs"
    alice = Browser(login_server.endpoint)
    alice.login("AKIDALICE", "alice-secret")
    status, headers, _ = alice.request("GET", "/console/queues/us-east-1/login-jobs?after=7")  # the older address
    assert (status, headers["location"]) == (303, page + "?after=7")  # ...is the key's own account's queue
    status, headers, _ = alice.request("POST", page + "/subscribe", {"csrf_token": alice.cookies["qs_console_csrf"],
                                                                     "subscription": "audit"})
    assert (status, headers["location"]) == (303, page + "?notice=Subscription+audit+created.")
    status, _, body = alice.request("GET", page)
    assert status == 200 and 'data-subscription="audit"' in body and 'class="subscribe"' in body
    worker = Browser(login_server.endpoint)
    worker.login("AKIDWORKER", "worker-secret")
    status, _, body = worker.request("GET", page)  # its policy names no QueueserverListSubscriptions
    assert status == 200 and 'id="subscriptions"' not in body and 'class="subscribe"' not in body
    status, _, _ = worker.request("POST", page + "/subscribe", {"csrf_token": worker.cookies["qs_console_csrf"],
                                                                "subscription": "sneaky"})
    assert status == 403
    status, _, _ = worker.request("POST", page + "~audit/delete", {"csrf_token": worker.cookies["qs_console_csrf"],
                                                                   "confirm": "audit"})
    assert status == 403
    body = alice.request("GET", page)[2]
    assert re.findall(r'data-subscription="([^"]+)"', body) == ["audit"]


def test_the_create_form_makes_no_queue_in_a_region_that_is_no_region_name(login_server: Any) -> None:
    """The SQS endpoint refuses such a region in the signature; the console's form reaches the same CreateQueue."""
    alice = Browser(login_server.endpoint)
    alice.login("AKIDALICE", "alice-secret")
    token = alice.cookies["qs_console_csrf"]
    for region in ("us-east-1:222222222222", "a" * 3000):
        status, headers, _ = alice.request("POST", "/console/create",
                                           {"csrf_token": token, "name": "login-regional", "region": region})
        assert status == 303 and "InvalidParameterValue" in unquote(headers["location"]), headers
    assert "login-regional" not in alice.request("GET", "/console/")[2]
    status, headers, _ = alice.request("POST", "/console/create",
                                       {"csrf_token": token, "name": "login-regional", "region": "eu-west-1"})
    assert (status, headers["location"].split("?")[0]) == (303, f"/console/queues/eu-west-1/{OWNER}/login-regional")
    assert "login-regional" in alice.request("GET", "/console/")[2]
