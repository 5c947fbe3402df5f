"""Reading request members: presence, type and range, with SQS's error wording.

Both wire formats decode to the JSON shape; Query carries every scalar as a string,
so integers and booleans are accepted in either form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from queueserver import errors
from queueserver.auth import Principal
from queueserver.client_connection import Receive
from queueserver.models import Queue


@dataclass(slots=True)
class RequestContext:
    """Who is asking and where: the region from the credential scope (or the queue URL), the URL base from the Host.

    `home_region` is the server's own region, whose queue URLs keep the short form `/<account>/<name>`;
    a queue of any other region is `/queue/<region>/<account>/<name>`, so that a URL alone names its queue.
    """

    region: str
    account: str
    base_url: str
    request_id: str
    sender_id: str
    home_region: str = ""
    trace_header: str | None = None  # the request's X-Amzn-Trace-Id header
    caller: Principal | None = None  # None: credentials are off and every request may do anything
    action: str = ""
    receive: Receive | None = None  # the request's ASGI receive channel (a long poll watches it for a hang-up)
    # What the door resolved and authorized for the handler (protocol/door.py).
    queue: Queue | None = None  # the QueueUrl's queue, or a move task's source
    destination: Queue | None = None  # a move task's DestinationArn
    return_check: Callable[[list[str]], None] | None = None  # a move task's origins: may messages go back there

    def queue_url(self, name: str, account: str | None = None) -> str:
        """`/<account>/<name>` in the server's own region, `/queue/<region>/<account>/<name>` in any other."""
        if self.region == self.home_region:
            return f"{self.base_url}/{account or self.account}/{name}"
        return f"{self.base_url}/queue/{self.region}/{account or self.account}/{name}"

    @property
    def target(self) -> Queue:
        """The queue the request acts on, resolved and authorized by the door (protocol/door.py)."""
        queue = self.queue
        if queue is None:  # a handler whose rule names no queue: refused, never run unchecked
            raise errors.InternalError()
        return queue


def required(params: dict[str, Any], name: str) -> Any:
    value = params.get(name)
    if value is None or value == "" or value == [] or value == {}:
        raise errors.MissingParameter(f"The request must contain the parameter {name}.")
    return value


def string(params: dict[str, Any], name: str, *, required_: bool = False) -> str | None:
    value = required(params, name) if required_ else params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.invalid_value(name, value, "The value must be a string.")
    return value


def integer(params: dict[str, Any], name: str, default: int | None, low: int, high: int, reason: str,
            *, required_: bool = False) -> int | None:
    value = required(params, name) if required_ else params.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        raise errors.invalid_value(name, value, reason)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise errors.invalid_value(name, value, reason) from None
    if not isinstance(value, int) or not low <= value <= high:
        raise errors.invalid_value(name, value, reason)
    return value


def string_list(params: dict[str, Any], name: str) -> list[str]:
    value = params.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise errors.InvalidParameterValue(f"The parameter {name} must be a list of strings.")
    return value


def string_map(params: dict[str, Any], name: str) -> dict[str, str]:
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise errors.InvalidParameterValue(f"The parameter {name} must be a map of strings.")
    return value


def entries(params: dict[str, Any], entry_name: str) -> list[dict[str, Any]]:
    value = params.get("Entries")
    if value is None or value == []:
        raise errors.EmptyBatchRequest(f"There should be at least one {entry_name} in the request.")
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise errors.InvalidParameterValue("The parameter Entries must be a list of entries.")
    return value


def queue_location(url: str, ctx: RequestContext) -> tuple[str, str, str]:
    """The region, account and name of the queue a QueueUrl names.

    `.../queue/<region>/<account>/<name>` is a queue of that region, `.../<account>/<name>` one of the
    server's own region, and a bare name (no account) one of the request's region.
    """
    # not urlsplit, which silently drops "\t\r\n" and so would find `victim` for `victim\n`
    path = url
    scheme_end = url.find("://")
    if scheme_end >= 0:
        path_start = url.find("/", scheme_end + 3)
        path = url[path_start:] if path_start >= 0 else ""
    if "?" in path:  # `in` first: most URLs have neither, and a partition costs a call
        path = path.partition("?")[0]
    if "#" in path:
        path = path.partition("#")[0]
    parts = list(filter(None, path.split("/")))
    if not parts:
        raise errors.QueueDoesNotExist()
    if len(parts) == 1:
        return ctx.region, ctx.account, parts[0]
    if len(parts) >= 4 and parts[-4] == "queue":
        return parts[-3], parts[-2], parts[-1]
    return ctx.home_region or ctx.region, parts[-2], parts[-1]
