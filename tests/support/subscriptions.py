"""Calling the subscription extension actions over the wire protocol of a test's boto3 client.

boto3 does not know queueserver's extension actions, so they go as raw requests: AWS JSON 1.0
(`X-Amz-Target: AmazonSQS.<Action>`) for a JSON client, a form-encoded `Action=<Action>` with an
XML answer for a Query client.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from support.wire import raw_json_call, raw_request

_NAMESPACE = "{http://queue.amazonaws.com/doc/2012-11-05/}"


def extension_call(client: Any, action: str, **members: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, the answer in the JSON shape) of one extension action, over the client's protocol;
    an error answers {"code": its code without the JSON protocol's namespace and "Exception", "message"}."""
    endpoint = client.meta.endpoint_url
    if client.meta.service_model.protocol == "json":
        response = raw_json_call(endpoint, action, members)
        answer = response.json() if response.body else {}
        if "__type" in answer:  # `com.amazon.coral.service#InvalidParameterValueException`: the Query code's
            answer = {"code": answer["__type"].rpartition("#")[2].removesuffix("Exception"),
                      "message": answer.get("message", "")}
        return response.status, answer
    form = urllib.parse.urlencode({"Action": action, "Version": "2012-11-05", **members}).encode()
    response = raw_request(endpoint, form, content_type="application/x-www-form-urlencoded")
    root = ElementTree.fromstring(response.body)
    if response.status != 200:
        code = root.find(f"{_NAMESPACE}Error/{_NAMESPACE}Code")
        message = root.find(f"{_NAMESPACE}Error/{_NAMESPACE}Message")
        return response.status, {"code": code.text if code is not None else "",
                                 "message": message.text if message is not None else ""}
    result = root.find(f"{_NAMESPACE}{action}Result")
    answer: dict[str, Any] = {}
    if result is not None:
        url = result.find(f"{_NAMESPACE}SubscriptionUrl")
        if url is not None:
            answer["SubscriptionUrl"] = url.text
        if action == "QueueserverListSubscriptions":
            answer["Subscriptions"] = [
                {child.tag.removeprefix(_NAMESPACE): child.text for child in entry}
                for entry in result.findall(f"{_NAMESPACE}Subscription")]
    return response.status, answer


def subscribe(client: Any, queue_url: str, name: str, start_from: str | None = None) -> str:
    members = {"QueueUrl": queue_url, "SubscriptionName": name}
    if start_from is not None:
        members["StartFrom"] = start_from
    status, answer = extension_call(client, "QueueserverCreateSubscription", **members)
    assert status == 200, answer
    return str(answer["SubscriptionUrl"])


def table_rows(db_path: Path, table: str) -> int:
    """Rows in a table of the server's SQLite file, read through a read-only connection."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
