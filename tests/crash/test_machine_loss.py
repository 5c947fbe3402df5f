"""Losing the machine: under sends, receives and deletes, Litestream and the server are SIGKILLed
together and the database, its WAL, its SHM and Litestream's state are deleted; `queueserver
restore` brings the database back from the replica into a fresh folder, and the queue is counted.

Every message acknowledged more than the replication window before the loss (the upload interval,
plus the second in which Litestream reads the WAL) is back; nothing deleted before that window
comes back; the restored file's integrity check is ok. support/machine_loss.py does the counting.

The replicas: a folder (another mount, in production); an S3 bucket served by moto's server,
which stands in for object storage (AWS S3, MinIO, R2 ...): the same S3 API that Litestream
speaks to them, on a loopback port, without the network; and a folder behind Debian's OpenSSH
server on a loopback port (sftp://, its host key verified).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import boto3
import pytest
from support.machine_loss import children, loss_run, replication, wait_until_replicating
from support.moto import CREDENTIALS, moto_server
from support.server import wait_for
from support.sftp import sftp_server

from queueserver.replication.supervisor import SILENCE_SECONDS

LOAD_SECONDS = 6.0


def _check(figures: object) -> None:
    assert figures.ok, figures.report()  # type: ignore[attr-defined]
    assert figures.acked_sends > 100 and figures.acked_deletes > 50, figures.report()  # type: ignore[attr-defined]
    print(figures.report())  # type: ignore[attr-defined]


def test_a_file_replica_brings_back_everything_acknowledged_before_the_window_and_nothing_deleted_before_it(
        tmp_path: Path) -> None:
    replica = tmp_path / "replica-mount"
    figures = loss_run(tmp_path, ["--replicate", str(replica)], LOAD_SECONDS)
    _check(figures)


def test_an_s3_replica_brings_back_everything_acknowledged_before_the_window_and_nothing_deleted_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():  # Litestream reads them from the server's environment
        monkeypatch.setenv(name, value)
    with moto_server(tmp_path) as moto:
        boto3.client("s3", endpoint_url=moto.endpoint, **_keys()).create_bucket(Bucket="replicas")
        figures = loss_run(tmp_path, ["--replicate", "s3://replicas/queueserver", "--replica-endpoint",
                                      moto.endpoint], LOAD_SECONDS)
    _check(figures)


def test_an_sftp_replica_brings_back_everything_acknowledged_before_the_window_and_nothing_deleted_before_it(
        tmp_path: Path) -> None:
    with sftp_server(tmp_path / "ssh") as sftp:
        figures = loss_run(tmp_path, ["--replicate", sftp.url(tmp_path / "sftp-replica"), *sftp.options()],
                           LOAD_SECONDS)
    _check(figures)


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"], "region_name": "us-east-1"}


def test_a_hung_litestream_is_killed_and_restarted(server_factory: Any, tmp_path: Path) -> None:
    """A stopped (SIGSTOP) Litestream says nothing; its read transaction would pin the WAL for good."""
    server = server_factory(tmp_path / "queueserver.db", "--replicate", str(tmp_path / "replica"))
    wait_until_replicating(server)
    (litestream,) = children(server.pid)
    os.kill(litestream, signal.SIGSTOP)
    wait_for(lambda: replication(server.endpoint)["restarts"] == 1, "the hung Litestream to be restarted",
             timeout=SILENCE_SECONDS + 30)
    assert "Litestream said nothing for 30 s; killing it" in server.stderr_text()
    wait_for(lambda: replication(server.endpoint)["running"] and children(server.pid) != [litestream],
             "a new Litestream")
