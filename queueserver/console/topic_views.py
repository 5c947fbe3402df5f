"""The console's topics: a list, a topic's page (attributes, subscriptions, a publish form) and the publish.

Each part runs an SNS action as the viewer through the SNS door (SnsCalls: the dispatcher's own rules,
protocol/sns/authorization.py), as its rule in auth/door.py declares: a page shows a section only where
the viewer may run the action behind it, and the form posts the action's members to its handler, which
the door judges again. A topic the viewer may not see is answered exactly as one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from queueserver.console.access import Viewer
from queueserver.console.calls import SnsCalls
from queueserver.errors import ConsoleError
from queueserver.models import Topic
from queueserver.storage import QueueEngine

TOPICS_SHOWN = 1000  # topics listed at most (all are in memory; the page says when there are more)
SUBSCRIPTION_PAGES = 10  # ListSubscriptionsByTopic pages (100 each) a topic page reads at most
# The topic form's console action -> the SNS action it runs (auth/door.py: `console <form>` runs it).
TOPIC_FORMS = {"publish": "Publish"}

Page = Callable[..., Response]
Fields = Callable[[Request], Awaitable["dict[str, str] | None"]]
Back = Callable[..., Response]


def topic_path(prefix: str, region: str, account: str, name: str) -> str:
    """A topic's page: region, account and name, so a link means the same to every viewer."""
    return f"{prefix}/topics/{quote(region, safe='')}/{quote(account, safe='')}/{quote(name, safe='')}"


@dataclass
class SubscriptionView:
    """A topic's subscription as its page lists it: the endpoint queue and how the queue receives."""

    arn: str
    endpoint: str
    raw: str = ""
    filter_policy: str = ""
    filter_scope: str = ""
    readable: bool = False  # GetSubscriptionAttributes was allowed


@dataclass
class TopicPages:
    """The topic routes' handlers, given what the console's other routes share."""

    engine: QueueEngine
    calls: SnsCalls
    viewer_of: Callable[[Request], Viewer | None]
    page: Page
    fields_of: Fields
    back: Back
    prefix: str

    def routes(self) -> list[Route]:
        return [
            Route("/topics", self.topics, methods=["GET"]),
            Route("/topics/{region}/{account}/{name}", self.topic_page, methods=["GET"]),
            Route("/topics/{region}/{account}/{name}/publish", self.publish, methods=["POST"]),
        ]

    def _viewer(self, request: Request) -> Viewer:
        viewer = self.viewer_of(request)
        assert viewer is not None  # the console sends a request without a viewer to the login form
        return viewer

    def _visible(self, viewer: Viewer, region: str, account: str, name: str) -> Topic | None:
        """The topic if it exists and the viewer may read its attributes, else None (the same work either way)."""
        arn = f"arn:aws:sns:{region}:{account}:{name}"
        allowed = self.calls.may("GetTopicAttributes", viewer.caller, {"TopicArn": arn}, region)
        topic = self.engine.topics.get(region, account, name)
        return topic if allowed else None

    def _missing(self, request: Request, region: str, account: str, name: str) -> Response:
        response = self.page(request, "missing.html", region=region, account=account, name=name, kind="topic")
        response.status_code = 404
        return response

    async def topics(self, request: Request) -> Response:
        """Every topic the viewer may read the attributes of, of any region and account, by name."""
        viewer = self._viewer(request)
        everything = sorted(self.engine.topics.loaded(), key=lambda t: (t.name, t.region, t.account))
        shown = [t for t in everything
                 if self.calls.may("GetTopicAttributes", viewer.caller, {"TopicArn": t.arn}, t.region)]
        counts = {t.id: len(self.engine.topics.subscriptions(t)) for t in shown[:TOPICS_SHOWN]}
        return self.page(request, "topics.html", topics=shown[:TOPICS_SHOWN], more=len(shown) > TOPICS_SHOWN,
                         counts=counts, topic_path=self._path)

    def _path(self, topic: Topic) -> str:
        return topic_path(self.prefix, topic.region, topic.account, topic.name)

    async def topic_page(self, request: Request) -> Response:
        region, account, name = (request.path_params[k] for k in ("region", "account", "name"))
        viewer = self._viewer(request)
        topic = self._visible(viewer, region, account, name)
        if topic is None:
            return self._missing(request, region, account, name)
        try:
            attributes = (await self.calls.call("GetTopicAttributes", region, {"TopicArn": topic.arn},
                                                viewer.caller))["Attributes"]
            subscriptions = await self._subscriptions(viewer, topic)
        except ConsoleError as error:  # e.g. the topic was deleted in between
            return PlainTextResponse(f"{error.code}: {error.message}", 403)
        return self.page(request, "topic.html", topic=topic, attributes=attributes, subscriptions=subscriptions,
                         here=self._path(topic),
                         may_publish=self.calls.may("Publish", viewer.caller, {"TopicArn": topic.arn}, region))

    async def _subscriptions(self, viewer: Viewer, topic: Topic) -> list[SubscriptionView] | None:
        """The topic's subscriptions with their delivery settings; None if the viewer may not list them."""
        caller, region = viewer.caller, topic.region
        if not self.calls.may("ListSubscriptionsByTopic", caller, {"TopicArn": topic.arn}, region):
            return None
        listed: list[dict[str, Any]] = []
        token = None
        for _ in range(SUBSCRIPTION_PAGES):
            params = {"TopicArn": topic.arn, **({"NextToken": token} if token else {})}
            answer = await self.calls.call("ListSubscriptionsByTopic", region, params, caller)
            listed += answer.get("Subscriptions", [])
            token = answer.get("NextToken")
            if not token:
                break
        shown = []
        for entry in listed:
            view = SubscriptionView(entry["SubscriptionArn"], entry.get("Endpoint", ""))
            asked = {"SubscriptionArn": view.arn}
            if self.calls.may("GetSubscriptionAttributes", caller, asked, region):
                attributes = (await self.calls.call("GetSubscriptionAttributes", region, asked, caller))["Attributes"]
                view.raw = attributes.get("RawMessageDelivery", "false")
                view.filter_policy = attributes.get("FilterPolicy", "")
                view.filter_scope = attributes.get("FilterPolicyScope", "") if view.filter_policy else ""
                view.readable = True
            shown.append(view)
        return shown

    async def publish(self, request: Request) -> Response:
        """The topic page's form: Publish as the viewer; the token must match the cookie."""
        fields = await self.fields_of(request)
        if fields is None:
            return PlainTextResponse("The form's security token is missing or stale: reload the page.", 403)
        region, account, name = (request.path_params[k] for k in ("region", "account", "name"))
        viewer = self._viewer(request)
        topic = self._visible(viewer, region, account, name)
        if topic is None:
            return self._missing(request, region, account, name)
        here = self._path(topic)
        if not self.calls.may("Publish", viewer.caller, {"TopicArn": topic.arn}, region):
            return PlainTextResponse("You may not Publish on this topic.", 403)
        params = {"TopicArn": topic.arn, "Message": fields.get("message", "")}
        for member, field in (("Subject", "subject"), ("MessageGroupId", "MessageGroupId"),
                              ("MessageDeduplicationId", "MessageDeduplicationId")):
            if fields.get(field):
                params[member] = fields[field]
        try:
            published = await self.calls.call("Publish", region, params, viewer.caller)
        except ConsoleError as error:
            return self.back(here, error=f"{error.code}: {error.message}")
        return self.back(here, notice=f"Message {published['MessageId']} published.")
