"""The SQS clients of the tests: boto3's JSON client, a botocore client speaking Query/XML, and
the never-retrying client of the crash tier.

`json_client` is boto3's own AWS JSON 1.0 client that makes one attempt per call.

`make_query_client` speaks the Query/XML protocol, for running tests over both protocols.

The current botocore speaks JSON to SQS; given the older SQS model (protocol "query", from
botocore 1.31.80, kept in tests/query/data) first on its data path, it serializes form-encoded
`Action=...` requests and parses the XML responses instead. Everything else (signing, retries,
exceptions, paginators) is botocore's own.

    from support.clients import make_query_client
    sqs = make_query_client(server.endpoint)            # like the JSON fixture's make_client
    sqs = make_query_client(server.endpoint, json_compatible=False)   # the raw Query parse

With `json_compatible` (the default) a parsed response also carries what botocore's JSON client
gives, so one test body's assertions hold over both protocols:
- list members that XML cannot send empty (a flattened list with no items has no element) but
  the server's JSON does: `queueUrls` of ListDeadLetterSourceQueues and `Results` of
  ListMessageMoveTasks, as [] (other empty lists, like a batch's `Failed`, JSON leaves out too,
  as AWS does);
- `Error.QueryErrorCode`: the modeled shape name whose legacy code the server sent, or the common
  `...Exception` name of an error inherited from the Query API (the JSON client reads it from
  `__type`; Query sends only the legacy code, which stays in `Error.Code`).
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError

__all__ = ["ResponseCutShort", "json_client", "make_query_client", "never_retrying_client"]

QUERY_MODEL_DIR = Path(__file__).resolve().parents[1] / "query" / "data"
# The errors SQS's JSON model has no shape for: the JSON `__type` AWS answers them with.
COMMON_ERROR_SHAPES = {
    "InvalidParameterValue": "InvalidParameterValueException",
    "MissingParameter": "MissingRequiredParameterException",
}
# Lists the server's JSON always carries, even empty.
ALWAYS_LISTED = {"ListMessageMoveTasks": ("Results",), "ListDeadLetterSourceQueues": ("queueUrls",)}


@functools.lru_cache(maxsize=1)
def _boto3_session() -> boto3.session.Session:
    """One boto3 session with the test credentials: clients built from it reuse the loaded model (fast)."""
    return boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")


def json_client(endpoint: str, region: str = "us-east-1", *, aws_access_key_id: str = "test",
                aws_secret_access_key: str = "test", **config_kwargs: Any) -> Any:
    """boto3's JSON client of `endpoint`: one attempt per call (config_kwargs go to botocore's Config)."""
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=45, **config_kwargs)
    return _boto3_session().client("sqs", region_name=region, endpoint_url=endpoint,
                                   aws_access_key_id=aws_access_key_id, aws_secret_access_key=aws_secret_access_key,
                                   config=config)


@functools.lru_cache(maxsize=1)
def query_session() -> botocore.session.Session:
    """One botocore session whose SQS model is the Query one (reused: loading a model is slow)."""
    session = botocore.session.get_session()
    loader = session.get_component("data_loader")
    loader.search_paths.insert(0, str(QUERY_MODEL_DIR))
    model = session.get_service_model("sqs")
    assert model.protocol == "query", f"expected the Query SQS model from {QUERY_MODEL_DIR}, got {model.protocol}"
    return session


def make_query_client(endpoint: str, region: str = "us-east-1", *, json_compatible: bool = True,
                      aws_access_key_id: str = "test", aws_secret_access_key: str = "test",
                      aws_session_token: str | None = None, verify: str | bool | None = None,
                      **config_kwargs: Any) -> Any:
    """An SQS client speaking Query/XML to `endpoint` (config_kwargs go to botocore's Config)."""
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=45, **config_kwargs)
    client = query_session().create_client(
        "sqs", region_name=region, endpoint_url=endpoint, verify=verify,
        aws_access_key_id=aws_access_key_id, aws_secret_access_key=aws_secret_access_key,
        aws_session_token=aws_session_token, config=config)
    if json_compatible:
        shapes_by_code = {shape.error_code: shape.name for shape in client.meta.service_model.error_shapes}
        client.meta.events.register_last(
            "after-call.sqs", functools.partial(_like_json, shapes_by_code=shapes_by_code))
    return client


def _like_json(parsed: dict[str, Any], model: Any, shapes_by_code: dict[str, str], **_: Any) -> None:
    error = parsed.get("Error")
    if error:
        code = error.get("Code", "")
        shape = shapes_by_code.get(code) or COMMON_ERROR_SHAPES.get(code)
        if shape is not None:
            error.setdefault("QueryErrorCode", shape)
        return
    for name in ALWAYS_LISTED.get(model.name, ()):
        parsed.setdefault(name, [])


# --- the crash tier's client: one attempt, and a cut response is no answer ---------------------

_CLIENT_LOCK = threading.Lock()  # building clients from one session is not thread-safe: the workers' own session
_WORKER_SESSIONS: list[boto3.session.Session] = []


class ResponseCutShort(BotoCoreError):
    fmt = "The response ended after {received} of its {expected} bytes: the server died while sending it"


def _refuse_cut_responses(http_response: Any, **_: Any) -> None:
    """botocore parses a body cut short by the server's death as an empty success ({}):
    a DeleteMessageBatch answered so would look acknowledged with nothing deleted."""
    expected = http_response.headers.get("content-length")
    received = len(http_response.content)
    if expected is not None and int(expected) != received:
        raise ResponseCutShort(received=received, expected=expected)


def never_retrying_client(endpoint: str, read_timeout: float = 5, connect_timeout: float = 2,
                          service: str = "sqs") -> Any:
    """A client that makes exactly one attempt per call and never takes a cut response for an answer.

    botocore's `max_attempts` counts *retries* (max_attempts=1 is two attempts); only
    `total_max_attempts` counts the first one.
    """
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=connect_timeout,
                    read_timeout=read_timeout, max_pool_connections=4)
    with _CLIENT_LOCK:
        if not _WORKER_SESSIONS:
            _WORKER_SESSIONS.append(boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test",
                                                          region_name="us-east-1"))
        client = _WORKER_SESSIONS[0].client(service, region_name="us-east-1", endpoint_url=endpoint,
                                         aws_access_key_id="test", aws_secret_access_key="test", config=config)
    client.meta.events.register(f"after-call.{service}", _refuse_cut_responses)
    return client
