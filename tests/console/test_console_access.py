"""The console with --credentials tells no one which queues another account has (a queue it may not see
answers exactly as a missing one), throttles logins per key id and per client address across parallel
connections, and keeps a bounded number of sessions per key. Plain HTTP: no page script is involved."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote_plus

import pytest
from support.auth import (KEYS, OTHER_ACCOUNT, OWNER_ACCOUNT, SignedClock, signed_call, signed_client,
                          write_credentials)
from support.console import Browser
from support.server import running

from queueserver.console.sessions import SESSIONS_PER_KEY
from queueserver.console.throttle import BURST, REFILL_SECONDS

QUEUE_PAGE = "/console/queues/us-east-1/{account}/{name}"


@pytest.fixture(scope="module")
def credentials_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    folder = tmp_path_factory.mktemp("console-access")
    with running(folder / "q.db", "--test-clock", "--credentials", str(write_credentials(folder / "keys.toml"))) \
            as server:
        yield server


def logged_in(server: Any, key_id: str) -> Browser:
    browser = Browser(server.endpoint)
    assert browser.login(key_id, KEYS[key_id]["secret_access_key"]) == (303, "/console/"), key_id
    return browser


def refill(server: Any) -> None:
    """Move the server's clock until every login bucket is full again."""
    SignedClock(server.endpoint).advance(BURST * REFILL_SECONDS + 1)


def _anonymous(body: str, name: str) -> str:
    """A page with the queue's name and the form token taken out, to compare two answers."""
    return re.sub(r'name="csrf_token" value="[^"]+"', "", body).replace(name, "NAME")


def test_a_queue_another_account_may_not_see_is_answered_exactly_as_one_that_does_not_exist(credentials_server):
    alice = signed_client("json", credentials_server.endpoint, "AKIDALICE")
    url = alice.create_queue(QueueName="private-orders")["QueueUrl"]
    alice.send_message(QueueUrl=url, MessageBody="secret")
    assert signed_call("json", credentials_server.endpoint, "AKIDALICE", "QueueserverCreateSubscription",
                       {"QueueUrl": url, "SubscriptionName": "billing"}).status == 200
    bob = logged_in(credentials_server, "AKIDBOB")
    answers = {}
    for name in ("private-orders", "no-such-queue", "private-orders~billing", "private-orders~nothing",
                 "no-such-queue~billing"):
        status, headers, body = bob.request("GET", QUEUE_PAGE.format(account=OWNER_ACCOUNT, name=name))
        answers[name] = (status, headers["content-type"], _anonymous(body, name))
    assert set(answers.values()) == {answers["no-such-queue"]}, answers.keys()
    assert answers["no-such-queue"][0] == 404 and "No queue NAME in us-east-1" in answers["no-such-queue"][2]

    token = bob.cookies["qs_console_csrf"]  # a form posted there anyway is answered the same way
    posted = set()
    for name in ("private-orders", "no-such-queue"):
        for action, fields in (("send", {"body": "x"}), ("purge", {"confirm": name}), ("subscribe",
                                                                                       {"subscription": "s"})):
            status, _, body = bob.request("POST", QUEUE_PAGE.format(account=OWNER_ACCOUNT, name=name) + f"/{action}",
                                          {"csrf_token": token, **fields})
            posted.add((status, _anonymous(body, name)))
    assert len(posted) == 1 and next(iter(posted))[0] == 404
    assert alice.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"] == "1"

    # Alice herself sees the queue, and a missing name of her own account is the same missing page.
    alice_browser = logged_in(credentials_server, "AKIDALICE")
    assert alice_browser.request("GET", QUEUE_PAGE.format(account=OWNER_ACCOUNT, name="private-orders"))[0] == 200
    status, _, body = alice_browser.request("GET", QUEUE_PAGE.format(account=OTHER_ACCOUNT, name="private-orders"))
    assert (status, "No queue private-orders in us-east-1" in body) == (404, True)


def _attempt(server: Any, key_id: str, secret: str) -> str:
    """One login from a fresh connection; what the form answered: "in", or the error it showed."""
    status, location = Browser(server.endpoint).login(key_id, secret)
    assert status == 303
    return "in" if location == "/console/" else unquote_plus(location.partition("error=")[2])


def _parallel(server: Any, attempts: list[tuple[str, str]]) -> list[str]:
    with ThreadPoolExecutor(len(attempts)) as pool:
        return list(pool.map(lambda attempt: _attempt(server, *attempt), attempts))


def test_forty_parallel_wrong_logins_of_one_key_are_not_all_tried(credentials_server):
    refill(credentials_server)
    answers = _parallel(credentials_server, [("AKIDALICE", f"guess-{i}") for i in range(40)])
    tried = [a for a in answers if a.startswith("The access key ID or the secret access key is wrong")]
    throttled = [a for a in answers if a.startswith("Too many login attempts")]
    assert (len(tried), len(throttled)) == (BURST, 40 - BURST), answers
    # The key's bucket is empty: even its right secret waits for the next token, which the clock brings.
    assert _attempt(credentials_server, "AKIDALICE", "alice-secret").startswith("Too many login attempts")
    SignedClock(credentials_server.endpoint).advance(REFILL_SECONDS)
    assert _attempt(credentials_server, "AKIDALICE", "alice-secret") == "in"


def test_forty_parallel_wrong_logins_of_forty_keys_from_one_address_are_not_all_tried(credentials_server):
    refill(credentials_server)
    answers = _parallel(credentials_server, [(f"AKIDGUESS{i}", "guess") for i in range(40)])
    assert sum(a.startswith("Too many login attempts") for a in answers) == 40 - BURST, answers
    # A successful login gives its attempt back: a key that logs in often is never throttled by it.
    refill(credentials_server)
    assert [_attempt(credentials_server, "AKIDBOB", "bob-secret") for _ in range(BURST + 5)] == ["in"] * (BURST + 5)


def test_a_key_keeps_at_most_its_number_of_live_sessions_and_a_new_login_ends_the_oldest(credentials_server):
    refill(credentials_server)
    browsers = [logged_in(credentials_server, "AKIDEVE") for _ in range(SESSIONS_PER_KEY + 1)]
    statuses = [browser.request("GET", "/console/")[0] for browser in browsers]
    assert statuses == [303] + [200] * SESSIONS_PER_KEY  # the first one was logged out by the last
    assert logged_in(credentials_server, "AKIDBOB").request("GET", "/console/")[0] == 200  # other keys keep theirs
