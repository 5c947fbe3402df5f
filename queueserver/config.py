"""The server's settings, fixed at start-up."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerConfig:
    db_path: str = "queueserver.db"
    host: str = "127.0.0.1"
    port: int = 9324
    region: str = "us-east-1"
    account_id: str = "000000000000"
    test_clock: bool = False
    # AWS's two 60-second rules (QueueDeletedRecently, PurgeQueueInProgress).
    enforce_cooldowns: bool = False
    # SQS's in-flight quotas; settings so that tests can reach them with a few messages.
    in_flight_limit: int = 120_000
    fifo_in_flight_limit: int = 120_000
    # With a credentials file every request must be signed by one of its keys; without, all are accepted.
    credentials_path: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
