"""The standby's pure parts: restore points for a time, generation paths, the follower's position, the read-only door."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from queueserver import errors
from queueserver.errors import StartupError
from queueserver.replication import replica
from queueserver.replication.follower import FollowStatus
from queueserver.replication.generations import fenced_message, generation_replica
from queueserver.replication.points import RestorePoint, parse_moment, point_before
from queueserver.standby_reads import READ_CALLS, ReadOnlyEngine
from queueserver.storage import QueueEngine


def at(text: str) -> datetime:
    return parse_moment(text)


POINTS = [RestorePoint(1, at("2026-01-01T12:00:03Z")), RestorePoint(2, at("2026-01-01T12:00:04Z")),
          RestorePoint(3, at("2026-01-01T12:00:09Z"))]


def test_a_moment_without_a_zone_is_utc_and_one_with_an_offset_is_kept() -> None:
    assert at("2026-01-01T12:00:00") == datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    assert at("2026-01-01T14:00:00+02:00") == datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    with pytest.raises(StartupError, match="expected a time like"):
        at("noon")


def test_a_point_counts_as_before_a_moment_only_once_its_whole_second_is_over() -> None:
    assert point_before(POINTS, at("2026-01-01T12:00:04.999Z")).txid == 1  # point 2 may be later in its second
    assert point_before(POINTS, at("2026-01-01T12:00:05Z")).txid == 2
    assert point_before(POINTS, at("2027-01-01T00:00:00Z")).txid == 3
    with pytest.raises(StartupError, match="no restore point before .* the oldest is 2026-01-01T12:00:03"):
        point_before(POINTS, at("2026-01-01T12:00:03.5Z"))
    with pytest.raises(StartupError, match="the replica has none"):
        point_before([], at("2026-01-01T12:00:03Z"))


def test_generation_zero_is_the_replica_itself_and_the_next_ones_folders_under_it() -> None:
    base = replica("s3://bucket/queues/")
    assert generation_replica(base, 0) is base
    assert generation_replica(base, 2).url == "s3://bucket/queues/gen-2"
    secret = replica("sftp://backup:hunter2@vault/srv/queues")
    assert "hunter2" not in fenced_message(secret, 0)
    assert "generation 1, newer than this database's generation 0" in fenced_message(secret, 0)


def test_the_followers_position_comes_from_its_records_and_the_lag_from_the_replicas_points() -> None:
    status = FollowStatus("file:///replica")
    status.running = True
    assert status.report().lag_seconds is None and status.report().role == "standby"
    status.note({"msg": "entering follow mode", "level": "INFO", "txid": "0000000000000005"})
    status.probed([RestorePoint(4, at("2026-01-01T12:00:00Z")), RestorePoint(5, at("2026-01-01T12:00:01Z"))])
    assert status.report().lag_seconds == 0 and status.report().transactions_behind == 0
    status.probed([RestorePoint(6, at("2020-01-01T00:00:00Z"))])
    assert status.report().transactions_behind == 1 and status.report().lag_seconds > 3600
    status.note({"msg": "follow: applied updates", "level": "INFO", "from_txid": "0000000000000005",
                 "to_txid": "0000000000000006"})
    assert status.position == 6 and status.report().lag_seconds == 0
    status.note({"msg": "follow: error", "level": "ERROR", "error": "disk full"})
    assert status.report().last_error is not None and status.report().last_error[1] == "follow: error: disk full"


def test_the_read_only_door_passes_only_reads_the_engine_has_and_refuses_the_rest_before_they_run() -> None:
    public = {name for name in dir(QueueEngine) if not name.startswith("_")} | {
        "health", "observe", "queue_tallies", "test_clock"}  # set in __init__
    assert READ_CALLS <= public, sorted(READ_CALLS - public)

    class Engine:
        def get_queue(self, *args: object) -> str:
            return "a queue"

        def send_messages(self, *args: object) -> None:
            raise AssertionError("a write reached the engine")

    door = ReadOnlyEngine(Engine(), lambda: errors.ServiceUnavailable("a standby"))  # type: ignore[arg-type]
    assert door.get_queue("us-east-1", "000000000000", "q") == "a queue"
    for write in ("send_messages", "purge_queue", "receive_messages", "a_call_added_later"):
        with pytest.raises(errors.ServiceUnavailable, match="a standby"):
            getattr(door, write)()
