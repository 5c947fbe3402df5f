"""The worker's rules that need no server: options, policies, units of work, and its imports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from queueserver.consumer import (
    ExponentialBackoff,
    LeaveToExpire,
    MakeVisibleNow,
    Worker,
)
from queueserver.consumer.heartbeat import CAP_SAFETY_MARGIN_MS, seconds_left_under_cap
from queueserver.consumer.policies import policy_from_name
from queueserver.consumer.sqs_calls import NO_ANSWER, per_entry
from queueserver.consumer.tracking import Tracked, units_of_work

CONSUMER = Path(__file__).resolve().parents[2] / "queueserver" / "consumer"
URL = "http://127.0.0.1:9/000000000000/jobs"


def message(receives: int | None = None, group: str | None = None) -> dict[str, object]:
    attributes: dict[str, str] = {}
    if receives is not None:
        attributes["ApproximateReceiveCount"] = str(receives)
    if group is not None:
        attributes["MessageGroupId"] = group
    return {"MessageId": "id", "ReceiptHandle": "rh", "Body": "b", "Attributes": attributes}


def test_exponential_backoff_doubles_with_each_receive_and_stops_at_its_cap() -> None:
    policy = ExponentialBackoff(initial_seconds=10, multiplier=2, max_seconds=60)
    assert [policy.visibility_after_failure(message(n)) for n in range(1, 7)] == [10, 20, 40, 60, 60, 60]
    assert policy.visibility_after_failure(message(None)) == 10, "no receive count counts as the first"
    assert ExponentialBackoff(max_seconds=43_200).visibility_after_failure(message(10_000)) == 43_200


def test_leave_to_expire_changes_nothing_and_make_visible_now_asks_for_zero() -> None:
    assert LeaveToExpire().visibility_after_failure(message(3)) is None
    assert MakeVisibleNow().visibility_after_failure(message(3)) == 0


def test_the_command_line_policy_names_map_to_the_policies() -> None:
    assert policy_from_name("expire") == LeaveToExpire()
    assert policy_from_name("visible-now") == MakeVisibleNow()
    assert policy_from_name("backoff", 2, 100) == ExponentialBackoff(initial_seconds=2, max_seconds=100)
    with pytest.raises(ValueError):
        policy_from_name("retry-forever")


@pytest.mark.parametrize("options, complaint", [
    ({"heartbeat_interval": 5.0}, "heartbeat_interval must be below extension_threshold"),
    ({"visibility_timeout": 3, "extension_threshold": 5.0},
     "extension_threshold must be > 0 and at most visibility_timeout"),
    ({"visibility_timeout": 3, "heartbeat_interval": 1.5}, "heartbeat_interval must be below extension_threshold"),
    ({"extension_threshold": 2.0, "heartbeat_interval": 2.0}, "heartbeat_interval must be below extension_threshold"),
    ({"visibility_timeout": 0}, "visibility_timeout"),
    ({"visibility_timeout": 43_201}, "visibility_timeout"),
    ({"max_messages": 11}, "max_messages"),
    ({"wait_time_seconds": 21}, "wait_time_seconds"),
    ({"max_concurrency": 0}, "max_concurrency"),
])
def test_options_that_cannot_work_are_refused_up_front(options: dict[str, object], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        Worker(object(), URL, lambda m: None, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("visibility_timeout, threshold, interval", [
    (30, 5.0, 1.0), (10, 5.0, 1.0), (3, 1.5, 0.75), (1, 0.5, 0.25),
])
def test_the_heartbeat_defaults_are_derived_from_any_visibility_timeout(
        visibility_timeout: int, threshold: float, interval: float) -> None:
    settings = Worker(object(), URL, lambda m: None, visibility_timeout=visibility_timeout).settings
    assert (settings.extension_threshold, settings.heartbeat_interval) == (threshold, interval)
    assert settings.heartbeat_on


def test_a_given_threshold_is_kept_and_the_heartbeat_derived_from_it() -> None:
    settings = Worker(object(), URL, lambda m: None, visibility_timeout=3, extension_threshold=2.5).settings
    assert (settings.extension_threshold, settings.heartbeat_interval) == (2.5, 1.0)
    settings = Worker(object(), URL, lambda m: None, visibility_timeout=3, extension_threshold=1.0).settings
    assert (settings.extension_threshold, settings.heartbeat_interval) == (1.0, 0.5)


def test_a_given_heartbeat_is_kept_beside_a_derived_threshold() -> None:
    settings = Worker(object(), URL, lambda m: None, visibility_timeout=4, heartbeat_interval=0.5).settings
    assert (settings.extension_threshold, settings.heartbeat_interval) == (2.0, 0.5)


def test_a_short_visibility_timeout_is_fine_once_the_heartbeat_is_off() -> None:
    worker = Worker(object(), URL, lambda m: None, visibility_timeout=2, heartbeat_interval=0)
    assert not worker.settings.heartbeat_on


def test_a_queue_is_fifo_when_its_url_ends_in_dot_fifo_unless_told_otherwise() -> None:
    assert Worker(object(), URL + ".fifo", lambda m: None).settings.is_fifo
    assert not Worker(object(), URL, lambda m: None).settings.is_fifo
    assert Worker(object(), URL, lambda m: None, fifo=True).settings.is_fifo


def test_every_receive_asks_for_the_attributes_the_worker_itself_needs() -> None:
    worker = Worker(object(), URL, lambda m: None, system_attribute_names=("SentTimestamp",),
                    message_attribute_names=())
    kwargs = worker.settings.receive_kwargs()
    assert kwargs["MessageSystemAttributeNames"] == ["SentTimestamp", "ApproximateReceiveCount", "MessageGroupId"]
    assert kwargs["MessageAttributeNames"] == []
    assert kwargs["VisibilityTimeout"] == 30 and kwargs["WaitTimeSeconds"] == 20


def test_a_fifo_receive_becomes_one_unit_per_group_in_the_order_received() -> None:
    received = [Tracked(message(group=g), f"rh{i}", 0, 30_000, g) for i, g in enumerate("ABAB")]
    units = units_of_work(received, fifo=True)
    assert [[t.receipt_handle for t in unit] for unit in units] == [["rh0", "rh2"], ["rh1", "rh3"]]
    assert len(units_of_work(received, fifo=False)) == 4


def test_the_twelve_hour_limit_is_counted_from_the_receive_with_a_safety_margin() -> None:
    t = Tracked(message(), "rh", received_at_ms=1_000, deadline_ms=31_000, group=None)
    assert seconds_left_under_cap(t, 1_000) == (43_200_000 - CAP_SAFETY_MARGIN_MS) // 1000
    assert seconds_left_under_cap(t, 1_000 + 43_190_000) == 8
    assert seconds_left_under_cap(t, 1_000 + 43_200_000) == 0


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_consumer_imports_only_the_stdlib_boto3_and_queueserver_clock() -> None:
    allowed_prefixes = ("boto3", "botocore", "queueserver.clock", "queueserver.consumer")
    stdlib = sys.stdlib_module_names | {"__future__"}
    offenders = sorted(
        f"{path.name}: {name}" for path in CONSUMER.glob("*.py") for name in _imports(path)
        if name.split(".")[0] not in stdlib and not name.startswith(allowed_prefixes)
    )
    assert offenders == []


def test_a_batch_entry_the_response_leaves_out_counts_as_failed_not_done():
    refused = {"Id": "1", "Code": "ReceiptHandleIsInvalid", "SenderFault": True, "Message": "stale"}
    response = {"Successful": [{"Id": "0"}], "Failed": [refused]}
    assert per_entry(3, response) == [None, refused, NO_ANSWER]
    assert per_entry(2, {}) == [NO_ANSWER, NO_ANSWER]  # what botocore makes of a body cut short
    assert NO_ANSWER["SenderFault"] is False  # so the heartbeat tries again
